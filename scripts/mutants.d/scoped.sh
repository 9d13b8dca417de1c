# shellcheck shell=bash
# Sourced by scripts/mutants: the per-scope layout (internal/authority/scoped.go) keeps an
# environment in a head, a document per scope and a directory; an intent of several scopes is
# accepted on all of them or on none as far as any reader sees, and a decision made on remembered
# scope documents is proved current before it is written.

mutant "a reader does not apply the head's log to the scopes it reads" internal/authority/scoped.go \
  's/if d, ok := v\.scopes\[name\]; ok && l\.Generation > appliedOf\(d\) \{/if d, ok := v.scopes[name]; false \&\& ok \&\& l.Generation > appliedOf(d) {/' \
  TestConformanceSplit/Outbox/SeveralScopesCrashAtEveryStep
mutant "an intent of several scopes is not put in the head's log" internal/authority/scoped.go \
  's/\tif !e\.Split \|\| len\(in\.Scopes\) < 2 \{/\tif true {/' \
  TestConformanceSplit/Outbox/SeveralScopesCrashAtEveryStep
mutant "a decision on a remembered scope it does not write is not made again on a fresh one" internal/authority/scoped.go \
  's/ \|\| v\.unwritten\(p\)\) \{/) {/' \
  TestConformanceSplit/Property/Coordination
mutant "a scope's events are stored under the key of the scope each event names" internal/authority/scoped.go \
  's/return ScopeEventKey\(e\.Name, name, ev\.Seq\)/return ScopeEventKey(e.Name, ev.Scope+name[:0], ev.Seq)/' \
  TestConformanceSplit/Authority/Property
mutant "a completion of one scope clears the pending mark of the others" internal/authority/scoped.go \
  's/Pending: s\.HasPending\(\), Env: s\}/Pending: false, Env: s}/' \
  TestConformanceSplit/Pending
mutant "a page far back in the per-scope layout's timeline reads once past the newer events" internal/authority/scoped.go \
  's/\t\t\tfor n := int64\(limit\); ; n \*= 2 \{/\t\t\tfor n, i := int64(limit), 0; i < 2; n, i = n*2, i+1 {/' \
  TestConformanceSplit/Outbox/HistoryPagesByTime
mutant "a loser of a scope's race keeps its generation though the winner's is newer" internal/authority/scoped.go \
  's/ && v\.newest\(\) < taken\.lo\n/ \&\& v.newest() >= 0\n/' \
  TestConformanceSplit/Generations/LoserOfTheScopesRace
mutant "a loser of a scope's race takes a new generation though its own is the newer" internal/authority/scoped.go \
  's/\t\treuse := taken\.hi > 0 && /\t\treuse := false \&\& taken.hi > 0 \&\& /' \
  TestConformanceSplit/Generations/LoserOfTheScopesRace
mutant "a generation an accept takes does not raise its scope's applied" internal/authority/scoped.go \
  's/\t\t\ts\.Applied = max\(s\.Applied, took\)/\t\t\ts.Applied = max(s.Applied, took*0)/' \
  TestConformanceSplit/Generations/LoserOfTheScopesRace
mutant "the sweep of the per-scope layout reads every scope, not the pending ones" internal/authority/sweep.go \
  's/return scopesOf\(append\(\[\]string\{\}, listed\.\.\.\)\)/return nil/' \
  TestConformanceSplit/Sweep/ReadsThePendingScopesOnly
mutant "the sweep leaves an intent of several scopes whose accepter stopped in the head's log" internal/authority/sweep.go \
  's/d\.Env\.Split && len\(d\.Env\.Log\) > 0 \{/d.Env.Split \&\& len(d.Env.Log) < 0 {/' \
  TestConformanceSplit/Sweep/FinishesAWideAcceptThatStopped
mutant "a write of one scope's document wakes the waiters of every scope" internal/authority/scoped.go \
  's/\t\t\t\ta\.wokeScopes\(env, written\)\n/\t\t\t\ta.wokeScopes(env, nil)\n/' \
  TestChangedScopeClosesAtItsScopesWrites ./internal/authority/
mutant "a write of one scope's document wakes none of its waiters" internal/authority/wake.go \
  's/\t\t\twake\(ScopeKey\(env, s\)\)\n/\t\t\t_ = s\n/' \
  TestChangedScopeClosesAtItsScopesWrites ./internal/authority/
