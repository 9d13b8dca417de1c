# shellcheck shell=bash
# Sourced by scripts/mutants: a sha is given in full, except a rollback's, whose prefix names the
# one commit the scope ran with it; every door lowercases what a person typed, and the Action's
# deploy command is told the commit it deploys.

mutant "the Authority takes an abbreviated sha" internal/authority/names.go \
  's/shaRE       = regexp\.MustCompile\(`\^\(\?:\[0-9a-f\]\{40\}\|\[0-9a-f\]\{64\}\)\$`\)/shaRE       = regexp.MustCompile(`^[0-9a-f]{7,64}\$`)/' \
  TestConformance/InputErrors/Refused
mutant "the command line takes a sha as it was typed" internal/cli/verbs.go \
  's/c\.s\.sha, c\.s\.before = authority\.CanonicalSha\(c\.s\.sha\), authority\.CanonicalSha\(c\.s\.before\)/c.s.before = authority.CanonicalSha(c.s.before)/' \
  TestShaIsGivenInFull ./internal/cli/
mutant "a prefix is resolved against what is live now and before only" internal/authority/resolve.go \
  's/if ev\.Kind == EventDeployed && ev\.Scope == scope \{/if false \&\& ev.Scope == scope {/' \
  TestConformance/Rollback/ToAPrefixOfACommitTheScopeRan
mutant "a prefix is resolved against the events status reads only" internal/authority/resolve.go \
  's/^const ResolveEvents = 1000\n/const ResolveEvents = StatusEvents\n/m' \
  TestConformance/Rollback/ToAPrefixOfACommitTheScopeRan
mutant "a commit only accepted counts as one the scope ran" internal/authority/resolve.go \
  's/if ev\.Kind == EventDeployed && ev\.Scope == scope \{/if (ev.Kind == EventDeployed || ev.Kind == EventAccepted) \&\& ev.Scope == scope {/' \
  TestConformance/Rollback/ToAPrefixOfACommitTheScopeRan
mutant "an ambiguous prefix names the newest of its commits" internal/authority/resolve.go \
  's/\tswitch len\(found\) \{\n\tcase 1:/\tswitch min(len(found), 1) {\n\tcase 1:/' \
  TestConformance/Rollback/ToAPrefixOfACommitTheScopeRan
mutant "the command line's rollback takes a prefix as it was typed" internal/cli/rollback.go \
  's/if to = authority\.CanonicalSha\(to\); /if to = strings.TrimSpace(to); /' \
  TestRollbackToAPrefix ./internal/cli/
mutant "the Action's deploy command is not told its commits" internal/action/action.go \
  's/\t\tCommits:  st\.Commits,\n//' \
  TestRunGivesTheCommandTheCommitItDeploys ./internal/action/
