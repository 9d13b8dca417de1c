//go:build latestwins_mutants

package intake

// mutant, set at link time in a binary built with the latestwins_mutants tag (-X
// github.com/latestwins/latestwins/app/internal/intake.mutant=readall), rebuilds an old behaviour so that a process
// test can show it catches it.
var mutant string
