# shellcheck shell=bash
# Sourced by scripts/mutants: what callers claim is checked at the boundary. Ordering facts from
# the future are refused (the CLI, the Action) or left out (signed pushes); over the App's API a
# claim's order, barriers and actor come from GitHub, the trusted configuration and the token,
# never from the request body.

mutant "ordering facts have no bound in the future" internal/authority/order.go \
  's/\t\tif f\.at\.After\(limit\) \{/\t\tif false \&\& f.at.After(limit) {/' \
  TestOrderFromTheFutureIsBadInput ./internal/cli/
mutant "a stored fact from the future still orders later pushes" internal/authority/order.go \
  's/\tb, _ = b\.Bounded\(now\)\n//' \
  TestStoredFutureOrderPinsNothing ./internal/authority/
mutant "a signed push's facts from the future are taken at their word" app/internal/intake/events.go \
  's/Order: a\.boundedOrder\(ctx, log, pushOrder\(ev\)\)\}/Order: pushOrder(ev)}/' \
  TestPushFromTheFutureIsTakenInArrivalOrder ./app/
mutant "an API claim takes the ordering facts of its body" app/internal/api/api.go \
  's/\t\tin\.Order, in\.Before, in\.Redeploy = authority\.Order\{\}, "", false\n//' \
  TestAPIClaimTakesNoOrderingFacts ./app/
mutant "an API claim takes the barriers of its body" app/internal/api/api.go \
  's/\t\tin\.Barrier = nil\n//' \
  TestAPIClaimCannotMakeABarrier ./app/
mutant "an API claim takes the actor of its body" app/internal/api/api.go \
  's/\t\tin\.Actor = wl\.Actor\n//' \
  TestAPIClaimActorIsTheTokens ./app/
mutant "an API claim is compared only with commits of the branch it names" app/internal/api/apiclaim.go \
  's/authority\.WithComparer\(gh\), authority\.CompareLive\(\), /authority.WithComparer(gh), /' \
  TestAPIClaimIsOrderedByGitHub ./app/
mutant "an API claim's barriers ignore the files GitHub lists" app/internal/api/apiclaim.go \
  's/\t\treturn s\.IsBarrier\(c\.Files\), nil/\t\treturn false, nil/' \
  TestAPIClaimBarriersAreTheConfigurations ./app/
