# shellcheck shell=bash
# Sourced by scripts/mutants. Environments of many scopes: status lists what is behind first and
# counts the rest, on the command line and on the status page.

mutant "a large environment's status is listed by name" internal/report/need.go \
  's/\tslices\.SortStableFunc\(rows, func\(a, b Row\) int \{ return a\.Need\(\) - b\.Need\(\) \}\)\n//' \
  TestStatusTextRowsPutsWhatIsBehindFirst ./internal/report/
mutant "a stuck scope needs no more than a settled one" internal/report/need.go \
  's/\tcase r\.Convergence\.State == authority\.ConvergenceStuck:\n\t\treturn NeedStuck\n//' \
  TestLargeEnvironmentListsWhatIsBehindFirst ./app/internal/web/

# The delivery report from the rollup kept beside the environment (report.KeptDelivery).
K=internal/report/kept.go
mutant "a kept report reads the whole timeline every time" $K \
  's/if raw == nil \|\| json\.Unmarshal\(raw, &r\) != nil/if true || json.Unmarshal(raw, \&r) != nil/' \
  TestKeptDeliveryReadsOnlyWhatIsNew ./internal/report/
mutant "a day is closed while a scope still waits since then" $K \
  's/if !sc\.BehindSince\.IsZero\(\) && sc\.BehindSince\.Before\(closed\) \{/if false {/' \
  TestKeptDeliveryReadsOnlyWhatIsNew ./internal/report/
