// Package faults holds the tests that put the DynamoDB adapter behind a proxy that loses requests
// and responses, against a real DynamoDB-compatible server, and check that ambiguous writes cause
// no double grant, no lost intent and no false "locked", and that lease histories are linearizable.
package faults
