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
mutant "a retry of a transition does not know the scopes its earlier attempt wrote" internal/authority/scoped.go \
  's/\t\t\t\twork\.Env\.Landed\[name\] = true/\t\t\t\twork.Env.Landed[name] = false/' \
  TestConformanceSplit/Outcomes/EndingOfSeveralScopesMeetsARace
mutant "a release's retry releases again what its earlier attempt released" internal/authority/authority.go \
  's/scopes := d\.Env\.unlanded\(sortedKeys\(g\.Tokens\)\)/scopes := sortedKeys(g.Tokens)/' \
  TestConformanceSplit/Outcomes/EndingOfSeveralScopesMeetsARace
mutant "a completion's retry forgets what its earlier attempt decided for the scopes it wrote" internal/authority/authority.go \
  's/\t\t\tres\.keep\(prev, c\.Scopes, d\.Env\.Landed\)/\t\t\t_ = prev/' \
  TestConformanceSplit/Outcomes/EndingOfSeveralScopesMeetsARace
mutant "a transition wakes only what its last attempt wrote" internal/authority/scoped.go \
  's/\t\t\ta\.wokeScopes\(env, wrote\)\n/\t\t\ta.wokeScopes(env, wrote[len(wrote)-1:])\n/' \
  TestChangedScopeClosesAtAnEarlierAttemptsWrites ./internal/authority/
mutant "a sweep whose head's log fails drops the re-drives it recorded" internal/authority/sweep.go \
  's/return work, exhausted, fmt\.Errorf\("sweep %s: apply the head/return nil, nil, fmt.Errorf("sweep %s: apply the head/' \
  TestConformanceSplit/Sweep/RedrivesWhenTheLogCannotBeApplied
mutant "the sweep of the per-scope layout reads every scope, not the pending ones" internal/authority/sweep.go \
  's/return scopesOf\(append\(\[\]string\{\}, listed\.\.\.\)\)/return nil/' \
  TestConformanceSplit/Sweep/ReadsThePendingScopesOnly
mutant "the sweep leaves an intent of several scopes whose accepter stopped in the head's log" internal/authority/sweep.go \
  's/d\.Env\.Split && len\(d\.Env\.Log\) > 0 \{/d.Env.Split \&\& len(d.Env.Log) < 0 {/' \
  TestConformanceSplit/Sweep/FinishesAWideAcceptThatStopped
mutant "a write of one scope's document wakes the waiters of every scope" internal/authority/scoped.go \
  's/\t\t\ta\.wokeScopes\(env, wrote\)\n/\t\t\ta.wokeScopes(env, nil)\n/' \
  TestChangedScopeClosesAtItsScopesWrites ./internal/authority/
mutant "a write of one scope's document wakes none of its waiters" internal/authority/wake.go \
  's/\t\t\twake\(ScopeKey\(env, s\)\)\n/\t\t\t_ = s\n/' \
  TestChangedScopeClosesAtItsScopesWrites ./internal/authority/
mutant "a gate refused on its retry leaves the leases its earlier attempt wrote" internal/authority/authority.go \
  's/\t\t\td\.Env\.giveBack\(prev, d\.Env\.Landed, now\)/\t\t\t_ = prev/' \
  TestConformanceSplit/Leases/GateOfSeveralScopesMeetsARace
mutant "the sweep applies the head's log to its scopes and leaves the entries in the log" internal/authority/scoped.go \
  's/\treturn a\.trimLog\(ctx, env, gens\)\n\}/\treturn nil\n}/' \
  TestConformanceSplit/Sweep/FinishesAWideAcceptThatStopped
mutant "a sweep whose retry finds nothing stalled drops the re-drives its earlier attempt wrote" internal/authority/sweep.go \
  's/keptWork, keptExhausted := landedWork\(work, d\.Env\), landedWork\(exhausted, d\.Env\)/keptWork, keptExhausted := landedWork(nil, d.Env), landedWork(nil, d.Env)/' \
  TestConformanceSplit/Sweep/SweepersMeetOnAnIntentOfSeveralScopes
