package authority

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	envNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)
	scopeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	shaRE       = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	prefixRE    = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// MinShaPrefix is the fewest hex digits of a sha that name a commit a scope ran (a rollback's
// target); everywhere else a sha is given in full.
const MinShaPrefix = 7

// shaFix says what a sha must be.
const shaFix = "give the full commit sha, 40 hex digits (64 in a SHA-256 repository), e.g. from `git rev-parse HEAD` or ${{ github.sha }}"

// ValidateEnvironment reports whether name is a valid environment name.
func ValidateEnvironment(name string) error {
	if !envNameRE.MatchString(name) || strings.Contains(name, "//") || strings.HasSuffix(name, "/") {
		return &InputError{Field: "environment", Value: name,
			Fix: "use 1-128 characters from A-Z a-z 0-9 . _ / -, starting with a letter or digit, without empty path segments (e.g. staging, preview/pr-803)"}
	}
	return nil
}

// ValidateScope reports whether name is a valid scope name.
func ValidateScope(name string) error {
	if !scopeNameRE.MatchString(name) {
		return &InputError{Field: "scope", Value: name,
			Fix: "use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit (e.g. api)"}
	}
	return nil
}

func validateScopes(scopes []string, required bool) error {
	if required && len(scopes) == 0 {
		return &InputError{Field: "scopes", Fix: "name at least one scope (e.g. --scopes api,web)"}
	}
	seen := make(map[string]bool, len(scopes))
	for _, s := range scopes {
		if err := ValidateScope(s); err != nil {
			return err
		}
		if seen[s] {
			return &InputError{Field: "scopes", Value: s, Fix: "name each scope once"}
		}
		seen[s] = true
	}
	return nil
}

// CanonicalSha is raw as the Authority takes a sha: without surrounding spaces, its hex digits
// lowercase, as git prints them. Whoever reads a sha from a person (a flag, an input) passes it
// through CanonicalSha before ValidateSha; what is not hex is left for ValidateSha to refuse.
func CanonicalSha(raw string) string { return strings.ToLower(strings.TrimSpace(raw)) }

// ValidateSha reports whether sha names one commit in full: 40 lowercase hex digits, or 64 in a
// SHA-256 repository. An abbreviation is refused, since the Authority compares shas as strings: a
// short and a full sha of one commit would be two commits to it (an intent not recognised as a
// repeat, a promotion that waits for a commit already live). Only new input is checked: stored
// state is read as it was written.
func ValidateSha(sha string) error {
	if !shaRE.MatchString(sha) {
		return &InputError{Field: "sha", Value: truncate(sha, 70), Fix: shaFix}
	}
	return nil
}

// ValidateShaPrefix reports whether prefix may name a commit by the start of its sha: at least
// MinShaPrefix lowercase hex digits (a full sha names itself).
func ValidateShaPrefix(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return &InputError{Field: "sha", Value: truncate(prefix, 70),
			Fix: fmt.Sprintf("give the commit's full sha, or at least its first %d hex digits (as `git log --oneline` shows them)", MinShaPrefix)}
	}
	return nil
}

func validateHolder(holder string) error {
	if holder == "" || len(holder) > maxIDLen {
		return &InputError{Field: "holder", Value: truncate(holder, 40), Fix: fmt.Sprintf("give a lease holder id of 1-%d characters (the run id, or host:pid)", maxIDLen)}
	}
	return nil
}

// SplitResource splits a lease resource "ENV/SCOPE" at its last slash.
func SplitResource(resource string) (env, scope string, err error) {
	i := strings.LastIndex(resource, "/")
	if i <= 0 || i == len(resource)-1 {
		return "", "", &InputError{Field: "resource", Value: resource, Fix: "name a lease as ENVIRONMENT/SCOPE (e.g. staging/api)"}
	}
	env, scope = resource[:i], resource[i+1:]
	if err := ValidateEnvironment(env); err != nil {
		return "", "", err
	}
	if err := ValidateScope(scope); err != nil {
		return "", "", err
	}
	return env, scope, nil
}

func shortSha(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

func resourceName(env, scope string) string { return fmt.Sprintf("%s/%s", env, scope) }
