# shellcheck shell=bash
# Sourced by scripts/mutants. Moving an environment between stores (authority.Move, latestwins
# migrate --from --to): the source refuses every write once moved, a live lease is never moved out
# from under its pass, the intent ids go along, and older builds refuse the marker.

A=internal/authority/authority.go
V=internal/authority/move.go
mutant "a moved environment still takes writes" $A \
  's/\t\tif err := movedError\(doc\); err != nil \{\n\t\t\treturn nil, err\n\t\t\}\n//' \
  TestMove/CarriesStateHistoryAndIntents ./internal/store/memory/
mutant "a move ignores live leases" $V \
  's/if l := d\.Env\.Scopes\[name\]\.Lease; liveLease\(&l, now, a\.skew\) \{/if l := d.Env.Scopes[name].Lease; false \&\& liveLease(\&l, now, a.skew) {/' \
  TestMove/RefusedWhileLeased ./internal/store/memory/
mutant "a move leaves the intent records behind" $V \
  's/if l, ok := a\.store\.\(RecordLister\); ok \{/if l, ok := a.store.(RecordLister); ok \&\& false {/' \
  TestMove/CarriesStateHistoryAndIntents ./internal/store/memory/
mutant "a moved document keeps the layout older builds write over" internal/authority/codec.go \
  's/s\.V, s\.Mv = storedVersionMoved, /s.Mv = /' \
  TestMovedIsALayoutOlderBuildsRefuse ./internal/authority/
mutant "the App's overviews fail on a moved environment" app/internal/core/env.go \
  's/\t\tcase errors\.Is\(err, authority\.ErrMoved\):\n/\t\tcase false:\n/' \
  TestOverviewLeavesAMovedEnvironmentOut ./internal/apiclient/
