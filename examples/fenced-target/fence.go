// Package fencedtarget shows how a deploy target refuses a stale writer with the fencing token that
// `latestwins run` gives the deploy command (LATESTWINS_FENCING_TOKEN). A token is greater than every
// token granted before it for the same ENV/SCOPE, so the target keeps the newest token it has
// accepted and refuses a write that carries a smaller one: a superseded run whose lease was taken
// over can finish its step, but can never overwrite what a newer run deployed.
//
// The rule is the same on every target: store the token beside what it guards, and make the write
// conditional on the stored token being no newer than the writer's, in one atomic step of the target.
// A read followed by an unconditional write is not enough: a newer writer can land between the two.
//
//   - objectstore.go: an object store's conditional write (If-Match on the ETag, as S3, GCS and Azure
//     Blob offer);
//   - kubernetes.go: an annotation on a Deployment, written with the resourceVersion that was read
//     (the apiserver refuses it with 409 Conflict when anything changed in between);
//   - fence.sql and deploy-sql.sh: one guarded SQL statement (PostgreSQL).
//
// An equal token is the same lease grant retrying its own write, and is accepted.
package fencedtarget

import (
	"errors"
	"fmt"
	"strconv"
)

// EnvToken is the variable `latestwins run` sets for a deploy of one scope.
const EnvToken = "LATESTWINS_FENCING_TOKEN"

// ErrStale is a write refused because the target has already accepted a newer token.
var ErrStale = errors.New("a newer deploy holds the target")

// StaleError says which token the target holds.
type StaleError struct {
	Held, Mine int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: the target holds fencing token %d, this deploy has %d", ErrStale, e.Held, e.Mine)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Token reads the deploy's fencing token from the environment.
func Token(getenv func(string) string) (int64, error) {
	v := getenv(EnvToken)
	if v == "" {
		return 0, fmt.Errorf("%s is not set: run the deploy under `latestwins run` (one scope)", EnvToken)
	}
	t, err := strconv.ParseInt(v, 10, 64)
	if err != nil || t <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", EnvToken, v)
	}
	return t, nil
}
