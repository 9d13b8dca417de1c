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
# Its fault and race tests: a pass killed at every request, lease histories under lost pushes and
# refused connections, and separate processes on a git+file:// store.
mutant "the git store moves the pending marker in a push of its own, before the document" $G/gitref.go \
  's/\t\tupdates = append\(updates, u\)\n/\t\tif err := s.tr.Push(ctx, []Update{u}, objs); err != nil {\n\t\t\treturn 0, fmt.Errorf("put %s: move the pending marker: %w", doc.Key, err)\n\t\t}\n/' \
  TestKilledAtEveryRequest ./$G/
mutant "the git store takes its own push, applied with its answer lost, for another's write" $G/gitref.go \
  's/\t\tcase out == applied:\n/\t\tcase false:\n/; s/\t\tcase out == moved:\n/\t\tcase out == moved, out == applied:\n/' \
  TestLeaseHistoryIsLinearizableUnderFaults ./$G/
mutant "the git store takes a push lost before the server for applied" $G/gitref.go \
  's/\t\tcase tip == old:\n\t\t\treturn unchanged, nil\n/\t\tcase tip == old:\n\t\t\treturn applied, nil\n/' \
  TestLeaseHistoryIsLinearizableUnderFaults ./$G/
# Whether 64 racing processes catch a forced push depends on a race landing in a few
# milliseconds; a write whose ref moved just before its push catches it every time.
mutant "the git store pushes with force, and overwrites a write that landed just before its push" $G/transport.go \
  's/Name: u\.Name, Old: u\.Old, New: u\.New\}/Name: u.Name, Old: ar.References[u.Name.String()], New: u.New}/' \
  TestRefMovedBeforeThePushIsAConflict ./$G/
mutant "the git store pushes with force, and claiming processes share a generation" $G/transport.go \
  's/Name: u\.Name, Old: u\.Old, New: u\.New\}/Name: u.Name, Old: ar.References[u.Name.String()], New: u.New}/' \
  TestProcessesClaimTogetherOnGit ./cmd/latestwins/
mutant "a dead pass's lease is taken over on the git store without recording the recovery" internal/authority/transitions.go \
  's/\t\tprev := \*l\n\t\ttookOverFrom = &prev\n/\t\t_ = *l\n/' \
  TestProcessesKilledDeployNewerPassTakesOverOnGit ./cmd/latestwins/
mutant "the lease model every store's histories are checked against grants a held lease to another" internal/testutil/leasemodel/leasemodel.go \
  's/if s\.Holder == "" \|\| s\.Holder == in\.Client \{/if true {/' \
  TestLeaseModelRejectsBrokenHistories ./internal/testutil/leasemodel/
