# shellcheck shell=bash
# Sourced by scripts/mutants: moving an environment from the single document to the per-scope
# layout (internal/authority/migrate.go) is a snapshot, the scopes' documents created from it, and
# the head without it; whoever meets the snapshot finishes the move first, a reader reads the
# snapshot whole, and nothing is lost to a stop or a race.

mutant "a scope's document that exists is overwritten from the snapshot" internal/authority/migrate.go \
  's/\t\treturn nil \/\/ written already: by this move, or after it/\t\tcur, gerr := a.store.Get(ctx, d.Key)\n\t\tif gerr != nil {\n\t\t\treturn gerr\n\t\t}\n\t\td.Rev = cur.Rev\n\t\t_, err = a.store.Put(ctx, d)\n\t\treturn err/' \
  TestConformance/Layout/MoveRacingWriters
mutant "a writer does not finish a move it meets" internal/authority/migrate.go \
  's/\tif !isMigrating\(d\) \{\n\t\treturn d, nil/\tif true {\n\t\treturn d, nil/' \
  TestConformance/Layout/MoveStoppedAtEveryRequest
mutant "a reader reads a move not finished as the per-scope layout" internal/authority/scoped.go \
  's/\tif isMigrating\(d\) \{\n\t\treturn singleOf\(d\), nil/\tif false \&\& isMigrating(d) {\n\t\treturn singleOf(d), nil/' \
  TestConformance/Layout/MoveStoppedAtEveryRequest
mutant "the snapshot drops the outbox without storing it" internal/authority/migrate.go \
  's/\t\tif err := a\.archive\(ctx, d\); err != nil \{/\t\tif err := error(nil); err != nil {/' \
  TestConformance/Layout/MoveKeepsEverything
mutant "the head is written without the snapshot before the scopes' documents" internal/authority/migrate.go \
  's/\tif err := eachParallel\(len\(names\), func\(i int\) error \{ return a.createScope/\tif _, err := a.store.Put(ctx, \&Doc{Key: head.Key, Rev: head.Rev, Env: \&Env{Name: env, Part: partHead, Desired: snap.Desired, EventSeq: snap.EventSeq, Policy: snap.Policy, Requires: snap.Requires}}); err == nil {\n\t\thead.Rev++\n\t}\n\tif err := eachParallel(len(names), func(i int) error { return a.createScope/' \
  TestConformance/Layout/MoveStoppedAtEveryRequest
mutant "the rollup of a timeline paged by time drops events by their per-scope numbers" internal/report/rollupread.go \
  's/\t\t\tr\.add\(ev, OrderOf\(state, ev\)\)/\t\t\tr.AddOrdered(ev, OrderOf(state, ev))/' \
  TestRollupOfThePerScopeLayout ./internal/report/
mutant "the delivery report of the per-scope layout reads on from the kept rollup by event numbers" internal/report/kept.go \
  's/\tif first\.Timed \{\n\t\t\/\/ Numbered per scope/\tif false \&\& first.Timed {\n\t\t\/\/ Numbered per scope/' \
  TestRollupOfThePerScopeLayout ./internal/report/
mutant "a transition of one scope of the per-scope layout reads every scope" internal/authority/scoped.go \
  's/\tif list == nil \{\n\t\tv\.all = true\n/\tif true {\n\t\tv.all = true\n/' \
  TestConformanceSplit/Layout/AThousandScopes
