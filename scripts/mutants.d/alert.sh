# shellcheck shell=bash
# Sourced by scripts/mutants: convergence alarms. A scope is late only strictly past alert-after,
# and behind only while a live lease deploys it; a notifier tells each change once across processes
# (it reads what was told again under the alarm's lease, and records a channel as told only once it
# was), never posts unsigned, and writes what it told only while it holds the lease; a stuck row
# never quotes what the reader may not see.

mutant "a scope is late at exactly alert-after" internal/authority/convergence.go \
  's/lag\.Waited <= lag\.AlertAfter/lag.Waited < lag.AlertAfter/' \
  TestJudgeBoundaries ./internal/authority/
mutant "an expired lease counts as a running deploy" internal/authority/convergence.go \
  's/l\.Holder != "" && now\.Before\(l\.ExpiresAt\) && /l.Holder != "" \&\& /' \
  TestJudgeBoundaries ./internal/authority/
mutant "an alarm is recorded under a lease taken over" internal/authority/alarm.go \
  's/if d\.Lease == nil \|\| d\.Lease\.Lease\.Holder != g\.Holder \|\| d\.Lease\.Lease\.Token != tok \{/if d.Lease == nil {/' \
  TestRecordAlarmIsFencedByTheLease ./internal/authority/
mutant "a notifier tells what it read before taking the alarm's lease" internal/alert/alert.go \
  's/\tif prev, err = n\.alarm\(ctx, name\); err != nil \{\n\t\treturn nil, err\n\t\}\n//' \
  TestANotifierReadsTheAlarmAgainUnderItsLease ./internal/alert/
mutant "a failed post is recorded as told" internal/alert/alert.go \
  's/\t\t\terrs = append\(errs, err\)\n\t\t\} else \{\n\t\t\tnext\.Webhook, told\.Webhook = late, true/\t\t\terrs = append(errs, err)\n\t\t}\n\t\t{\n\t\t\tnext.Webhook, told.Webhook = late, true/' \
  TestFailedPostIsToldNextSweep ./internal/alert/
mutant "an alarm is posted unsigned" internal/alert/webhook.go \
  's/\tif len\(n\.o\.Secret\) == 0 \{/\tif false {/' \
  TestNoSecretNoPost ./internal/alert/
mutant "a stuck row quotes a promotion wait the reader may not see" internal/report/viewer.go \
  's/\t\t\tr\.Late = r\.lateText\(st\.Name\).*\n//' \
  TestStatusRowsSayConvergence ./internal/report/
mutant "a push through the App drops the trusted file's alert-after" app/internal/core/core.go \
  's/\t\tin\.AlertAfter, in\.Gates = sel\.AlertAfter, sel\.Gates\n/\t\tin.Gates = sel.Gates\n/' \
  TestPushCarriesAlertAfterToThePage ./app/
mutant "latestwins sweep tells no alarm" internal/cli/sweep.go \
  's/\ttold, alarmErr := alarms\.Tell\(ctx\)\n\tif c\.s\.jsonOut \{/\tvar told *alert.Report\n\tvar alarmErr error\n\tif c.s.jsonOut {/' \
  TestSweepTellsAlarms ./internal/cli/
mutant "latestwins sweep succeeds when an alarm could not be told" internal/cli/sweep.go \
  's/\tcase rep != nil && len\(rep\.Failed\) > 0:/\tcase false:/' \
  TestSweepFailsOnAnAlarmItCannotTell ./internal/cli/
