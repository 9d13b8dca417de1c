# shellcheck shell=bash
# Sourced by scripts/mutants: the act race with no store given keeps the state in the workflow's
# repository, pushed with the workflow's token, and under refs/latestwins/ only. The act runs build
# latestwins from a copy of the module that has the mutant in it (e2e's copyModule applies the build
# overlay). They need LATESTWINS_TEST_ACT (scripts/test sets it), and take about half a minute each.
#
# act hands every input of a composite action to its steps as INPUT_* variables, which GitHub does
# not: a mutant that drops INPUT_GITHUB-TOKEN from action.yml survives act, so none is here.

mutant "the Action's default store needs GITHUB_TOKEN in the job's env" internal/cli/action.go \
  's/if v := getenv\(k\); v != "" \|\| k != gitref\.GitHubTokenVar \{/if v := getenv(k); true || v != "" || k != gitref.GitHubTokenVar {/' \
  TestRaceThroughActInTheRepository ./e2e/
mutant "the git store keeps the state on branches" internal/store/gitref/refname.go \
  's/const Namespace = "refs\/latestwins\/"/const Namespace = "refs\/heads\/latestwins\/"/' \
  TestRaceThroughActInTheRepository ./e2e/
