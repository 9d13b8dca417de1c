# shellcheck shell=bash
# Sourced by scripts/mutants. The outbox copies its records ahead of a later write (docs/design.md,
# "The outbox"): a write drops only what it stored, a pass's last write stores the whole outbox, and
# an intent waiting there is remembered exactly as long as its record.

O=internal/authority/outbox.go
A=internal/authority/authority.go
mutant "the outbox is dropped without its records stored" $O \
  's/if err := a\.store\.PutRecords\(ctx, a\.records\(e\)\); err != nil \{/if err := error(nil); err != nil {/' \
  TestConformance/Outbox/EveryEventOnce
mutant "a pass's last write leaves the outbox to a later one" $A \
  's/\(attempt == 0 && \(flush \|\| n >= outboxBatch\)\)/(attempt == 0 \&\& n >= outboxBatch)/' \
  TestConformance/Outbox/RequestsPerPass
mutant "an intent waiting in the outbox is remembered past the retention" $A \
  's/if r := e\.pendingAccept\(id\); r != nil && !a\.expired\(\*r, a\.clock\.Now\(\)\) \{/if r := e.pendingAccept(id); r != nil {/' \
  TestConformance/OutOfOrder/AfterTheRetention
mutant "an intent forgotten in the outbox stays there beside its new acceptance" $A \
  's/\t\t\twork\.Env\.Accepts = slices\.DeleteFunc\(work\.Env\.Accepts, func\(in IntentRecord\) bool \{ return a\.expired\(in, now\) \}\)\n//' \
  TestConformance/OutOfOrder/AfterTheRetention

# The long poll (docs/benchmarks.md, "Hand-over through the App's API"): a release through serve
# wakes the waiting gate request, which the App holds instead of answering at once.
mutant "a write wakes none of the environment's waiters" $A \
  's/\t\t\ta\.woke\(key\)\n//' \
  TestChangedClosesAtTheNextWrite ./internal/authority/
mutant "the API answers a gate at once whatever wait it is asked" app/internal/api/api.go \
  's/wait := min\(time\.Duration\(req\.WaitMillis\)\*time\.Millisecond, p\.longPoll\)/wait := time.Duration(0)/' \
  TestGateWaitIsHeldUntilTheRelease ./internal/apiclient/
mutant "a pass pauses before its first long poll" internal/pass/pass.go \
  's/\t\t\t\tcontinue \/\/ the first answer comes at once; the far end waits from the next\n//' \
  TestGateLongPollsAFarEndThatWaits ./internal/pass/
mutant "a long-polling gate holds a server that is shutting down" app/internal/api/api.go \
  's/\t\tcase <-p\.stopping: \/\/ the server shuts down: the client asks again, elsewhere or later\n\t\t\tt\.Stop\(\)\n\t\t\treturn nil, err\n//' \
  TestGateWaitEndsWhenTheServerStops ./internal/apiclient/
