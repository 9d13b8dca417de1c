# shellcheck shell=bash
# Sourced by scripts/mutants: the git store's compare-and-swap is the server's old-id check, and a
# push whose answer is lost is settled by reading the ref again.

G=internal/store/gitref
mutant "the git store pushes with force (the old id the server shows, not the one read)" $G/transport.go \
  's/Name: u\.Name, Old: u\.Old, New: u\.New\}/Name: u.Name, Old: ar.References[u.Name.String()], New: u.New}/' \
  TestStaleWriteIsRefused ./$G/
mutant "the git store takes a push without an answer for a success" $G/gitref.go \
  's/out, serr := s\.settle\(ctx, ref, old\.hash, commit, next\.Rev\)/out, serr := applied, error(nil)/' \
  "TestLostAnswers/never answered" ./$G/
mutant "the git store takes a lost answer for a conflict when a newer write covers its own" $G/gitref.go \
  's/\t\t\th = parent\n/\t\t\treturn moved, nil\n/' \
  "TestLostAnswersAcrossCompaction/applied under more writes than a commit names" ./$G/
mutant "the git store takes a refused push for a conflict without reading the ref again" $G/gitref.go \
  's/(\t\tout, serr := s\.settle\(ctx, ref, old\.hash, commit, next\.Rev\)\n)/\t\tif _, ok := err.(*RefusedError); ok {\n\t\t\treturn 0, fmt.Errorf("refused: %w", authority.ErrConflict)\n\t\t}\n$1/' \
  "TestGitHubRefusedSwap/applied" ./$G/
mutant "the Action's github:// store does not fall back on the github-token input" internal/cli/action.go \
  's/if v := getenv\(k\); v != "" \|\| k != gitref\.GitHubTokenVar \{/if v := getenv(k); true || v != "" || k != gitref.GitHubTokenVar {/' \
  TestActionDefaultStoreOnGitHub ./internal/cli/
mutant "the Action calls a store's refusal of its token retryable" internal/action/action.go \
  's/\tcase accessDenied\(err\):/\tcase false \&\& accessDenied(err):/' \
  TestAccessDeniedIsAnError ./internal/action/
mutant "the git store pushes records on a stale records ref again after a refusal" $G/records.go \
  's/if attempt > 1 \|\| !s\.knowsGroups\(names\) \{/if !s.knowsGroups(names) {/' \
  TestRoundTrips ./internal/store/gitref/
