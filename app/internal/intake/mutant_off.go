//go:build !latestwins_mutants

package intake

// mutant is empty in every binary built without the latestwins_mutants tag, releases among them:
// no old behaviour can be switched on at link time (mutant_on.go).
const mutant = ""
