# shellcheck shell=bash
# Mutants of the change window gate (internal/authority/window.go, read from the file by
# internal/config/windows.go and from the command line by internal/cli/windows.go): each breaks
# one rule a user relies on, and the calendar's, the configuration's, the command line's or the
# conformance suite's tests must then fail. Sourced by scripts/mutants, which defines `mutant`.

pw=internal/authority/window.go
wa=./internal/authority/

mutant "change windows: a deny period does not win over an allowed one" $pw \
  's/if end, in := c\.denied\(t\); in \{/if end, in := c.denied(t); in \&\& len(c.allow) == 0 {/' \
  TestWindowsDenyWinsOverAllow $wa
mutant "change windows: a period lasts wall-clock time across a daylight-saving change" $pw \
  's/\tif s\.IsZero\(\) \|\| s\.After\(t\) \{\n\t\treturn time\.Time\{\}/\tif s.IsZero() || s.After(t) || !time.Date(s.Year(), s.Month(), s.Day(), s.Hour(), s.Minute()+int(p.d.Minutes()), 0, 0, s.Location()).After(t) {\n\t\treturn time.Time{}/' \
  TestWindowsDurationIsAbsoluteAcrossDaylightSaving $wa
mutant "change windows: a period that started before now does not count" $pw \
  's/s := p\.start\.Next\(t\.Add\(-p\.d\)\)/s := p.start.Next(t.Add(-time.Second))/' \
  TestWindowsAllowPeriods $wa
mutant "change windows: the window opens a minute after a deny period ends" $pw \
  's/\t\t\tt, denied = end, denied \|\| leading\n/\t\t\tt, denied = end.Add(time.Minute), denied || leading\n/' \
  TestWindowsDenyWinsOverAllow $wa
mutant "change windows: starts are read in UTC, not the time zone" $pw \
  's/\tspec\.Location = loc\n/\tspec.Location = time.UTC\n/' \
  TestWindowsAllowPeriods $wa
mutant "change windows: the retry after is rounded down, before the window opens" $pw \
  's/secs := \(w\.Opens\.Sub\(now\) \+ time\.Second - 1\) \/ time\.Second/secs := w.Opens.Sub(now) \/ time.Second/' \
  TestWindowsRetryAfterIsUntilItOpens $wa
mutant "change windows: an opening more than a week ahead is named by its day only" $pw \
  's/t\.Sub\(w\.Asked\) < 7\*24\*time\.Hour/t.Sub(w.Asked) < 70*24*time.Hour/' \
  TestWindowsWording $wa
mutant "change windows: a period over 31 days is accepted" $pw \
  's/d < MinWindowDuration \|\| d > MaxWindowDuration/d < MinWindowDuration/' \
  TestWindowsProblems ./internal/config/
mutant "change windows: a rollback is held by a window" internal/authority/decide.go \
  's/\tif ref == nil \|\| ref\.Rollback \{\n\t\t\/\/ A rollback is the way back/\tif ref == nil {\n\t\t\/\/ A rollback is the way back/' \
  TestConformance/Windows/RollbackIsNotHeld
mutant "change windows: an environment's windows are not stored" internal/authority/gates.go \
  's/\tif g\.Windows != nil \{\n\t\tnext\.Windows = g\.Windows\n\t\}\n//' \
  TestConformance/Windows/NewestGoesWhenTheWindowOpens
mutant "change windows: an unknown time zone in the file is accepted" internal/config/windows.go \
  's/\t\t\tp\.addf\(zone, "%s: timezone %q: %s", where, w\.Timezone, fixOf\(err\)\)\n/\t\t\tloc = time.UTC\n/' \
  TestWindowsProblems ./internal/config/
mutant "change windows: --windows is not carried by the intent" internal/cli/windows.go \
  's/f := c\.fs\.Lookup\("windows"\)/f := c.fs.Lookup("windows-unread")/' \
  TestWindowsFromTheCommandLine ./internal/cli/
mutant "change windows: a closed window's hold is said to end before the window opens" internal/authority/decide.go \
  's/ReasonWindow, w, w\.retryAfter\(now\), w\.Opens/ReasonWindow, w, w.retryAfter(now), now/' \
  TestEvaluatorHoldsOutsideTheWindow ./internal/authority/
