//go:build latestwins_mutants

package pass

// mutant, set at link time in a binary built with the latestwins_mutants tag (-X
// github.com/latestwins/latestwins/internal/pass.mutant=NAME), rebuilds an old behaviour so that
// the process tests can show they catch it.
var mutant string
