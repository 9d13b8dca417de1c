// Package faults holds the tests that race separate processes over the DynamoDB adapter behind a
// proxy that loses requests and responses, against a real DynamoDB-compatible server, and check that
// ambiguous writes cause no lost or duplicated intent, no double grant and no false "locked", and
// that lease histories are linearizable. Each racer has what a process of its own has (an SDK
// client, a store and an Authority), so only the table's conditional writes stand between them; the
// tests prove it by catching adapters with the condition, or the resolution of ambiguous writes,
// taken away.
package faults
