# shellcheck shell=bash
# Sourced by scripts/mutants. Environments of many scopes: status lists what is behind first and
# counts the rest, on the command line and on the status page.

mutant "a large environment's status is listed by name" internal/report/need.go \
  's/\tslices\.SortStableFunc\(rows, func\(a, b Row\) int \{ return a\.Need\(\) - b\.Need\(\) \}\)\n//' \
  TestStatusTextRowsPutsWhatIsBehindFirst ./internal/report/
mutant "a stuck scope needs no more than a settled one" internal/report/need.go \
  's/\tcase r\.Convergence\.State == authority\.ConvergenceStuck:\n\t\treturn NeedStuck\n//' \
  TestLargeEnvironmentListsWhatIsBehindFirst ./app/internal/web/
