# shellcheck shell=bash
# Sourced by scripts/mutants. Stored state is checked when read (internal/authority/invariants.go):
# each check removed or weakened must fail the test that corrupts that invariant in a stored
# document; the check skipped altogether must fail every store's hand-edit test. Then the policy
# verb's refusal of an unknown environment, and a repository's own paths that must never widen the
# trusted ones.

I=internal/authority/invariants.go
C=TestCorruptStateIsRefusedOnRead
mutant "on read: observed may pass desired" $I \
  's/if e\.Observed < 0 \|\| e\.Observed > e\.Desired \{/if e.Observed < 0 {/' \
  "$C/observed 50, desired 1" ./internal/authority/
mutant "on read: an unknown policy passes" $I \
  's/if e\.Policy != "" && e\.Policy != PolicyLatest && e\.Policy != PolicyQueue \{/if false {/' \
  "$C/unknown policy" ./internal/authority/
mutant "on read: an owner may pass desired" $I \
  's/if sc\.Owner < 0 \|\| sc\.Owner > e\.Desired \{/if sc.Owner < 0 {/' \
  "$C/owner above desired" ./internal/authority/
mutant "on read: a queue may wait behind no head" $I \
  's/if sc\.Mailbox == nil && len\(sc\.Queue\) > 0 \{/if false {/' \
  "$C/queue without a head" ./internal/authority/
mutant "on read: a pending intent may pass desired" $I \
  's/if r\.Generation < 1 \|\| r\.Generation > e\.Desired \{/if r.Generation < 1 {/' \
  "$C/waiting intent above desired" ./internal/authority/
mutant "on read: a pending intent may be generation 0" $I \
  's/if r\.Generation < 1 \|\| r\.Generation > e\.Desired \{/if r.Generation > e.Desired {/' \
  "$C/head at generation 0" ./internal/authority/
mutant "on read: a queue may repeat a generation" $I \
  's/if i > 0 && r\.Generation <= prev \{/if i > 0 \&\& r.Generation < prev {/' \
  "$C/queue repeats the head generation" ./internal/authority/
mutant "on read: the queue bound is not checked" $I \
  's/if waiting > MaxWaitingOnRead \{/if false {/' \
  "$C/queue past every limit" ./internal/authority/
mutant "on read: a held lease need only be within desired" $I \
  's/\(l\.Generation < 1 \|\| l\.Generation > sc\.Owner\)/(l.Generation < 1 || l.Generation > e.Desired)/' \
  "$C/lease held by a generation above owner" ./internal/authority/
mutant "on read: live may pass desired" $I \
  's/if l := sc\.Live; l != nil && \(l\.Generation < 1 \|\| l\.Generation > e\.Desired\) \{/if l := sc.Live; l != nil \&\& l.Generation < 1 {/' \
  "$C/live above desired" ./internal/authority/
mutant "on read: a freeze may pass desired" $I \
  's/if f := sc\.Freeze; f != nil && \(f\.Generation < 1 \|\| f\.Generation > e\.Desired\) \{/if f := sc.Freeze; f != nil \&\& f.Generation < 1 {/' \
  "$C/freeze above desired" ./internal/authority/
mutant "on read: a failure may pass desired" $I \
  's/if f := sc\.Failure; f != nil && \(f\.Generation < 1 \|\| f\.Generation > e\.Desired\) \{/if f := sc.Failure; f != nil \&\& f.Generation < 1 {/' \
  "$C/failure above desired" ./internal/authority/
mutant "on read: outbox events may come out of order" $I \
  's/if ev\.Seq <= seq \|\| ev\.Seq > e\.EventSeq \{/if ev.Seq < 1 || ev.Seq > e.EventSeq {/' \
  "$C/outbox events out of order" ./internal/authority/
mutant "on read: an outbox event may pass the event seq" $I \
  's/if ev\.Seq <= seq \|\| ev\.Seq > e\.EventSeq \{/if ev.Seq <= seq {/' \
  "$C/outbox event past the event seq" ./internal/authority/
mutant "on read: an outbox intent may pass desired" $I \
  's/if in\.Generation < 0 \|\| in\.Generation > e\.Desired \{/if in.Generation < 0 {/' \
  "$C/outbox intent above desired" ./internal/authority/

D=internal/authority/codec.go
mutant "on read: nothing is checked (memory)" $D \
  's/\tif err := e\.checkInvariants\(\); err != nil \{/\tif err := e.checkInvariants(); err != nil \&\& false {/' \
  TestHandEditedDocumentIsRefused ./internal/store/memory/
mutant "on read: nothing is checked (bolt)" $D \
  's/\tif err := e\.checkInvariants\(\); err != nil \{/\tif err := e.checkInvariants(); err != nil \&\& false {/' \
  TestHandEditedDocumentIsRefused ./internal/store/bolt/
mutant "on read: nothing is checked (command line)" $D \
  's/\tif err := e\.checkInvariants\(\); err != nil \{/\tif err := e.checkInvariants(); err != nil \&\& false {/' \
  TestCorruptStateIsSaidPlainly ./internal/cli/
mutant "on read: a corrupt document is named by the name it holds, not its key" $D \
  's/\t\t\t\tce\.Key = s\.Key \/\/ the key it is stored under/\t\t\t\t_ = ce \/\/ the key it is stored under/' \
  TestDecodeEnvChecksEveryLayout ./internal/authority/
mutant "on read: the command line prints the chain of operations around a corruption" internal/cli/cli.go \
  's/\tif c, ok := errors\.AsType\[\*authority\.CorruptError\]\(err\); ok \{/\tif c, ok := errors.AsType[*authority.CorruptError](err); ok \&\& false {/' \
  TestCorruptStateIsSaidPlainly ./internal/cli/

# latestwins policy refuses an environment nothing was accepted for, as every other verb does.
mutant "the policy of an unknown environment creates it" internal/authority/policy.go \
  's/\t\tif d\.Env == nil \{\n\t\t\treturn false, &InputError\{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"\}\n\t\t\}\n\t\t\/\/ In the per-scope/\t\tif d.Env == nil {\n\t\t\td.Env = newEnv(env)\n\t\t}\n\t\t\/\/ In the per-scope/' \
  TestConformance/InputErrors/Refused
mutant "the policy of an unknown environment creates it (command line)" internal/authority/policy.go \
  's/\t\tif d\.Env == nil \{\n\t\t\treturn false, &InputError\{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"\}\n\t\t\}\n\t\t\/\/ In the per-scope/\t\tif d.Env == nil {\n\t\t\td.Env = newEnv(env)\n\t\t}\n\t\t\/\/ In the per-scope/' \
  TestPolicyOfAnUnknownEnvironmentIsRefused ./internal/cli/
mutant "the policy verb of an unknown environment creates the store" internal/cli/verbs.go \
  's/is not made for the refusal\.\n\tc\.mode = storeMustExist/is not made for the refusal.\n\tc.mode = storeCreate/' \
  TestPolicyOfAnUnknownEnvironmentIsRefused ./internal/cli/

# A repository's own paths narrow the trusted ones, never widen them.
mutant "a repository's own paths widen the trusted ones" internal/config/narrow.go \
  's/\t\t\t\ts\.NarrowPaths = paths\n/\t\t\t\ts.Paths, s.NarrowPaths = paths, nil\n/' \
  TestNarrowPathsNeverWiden ./internal/config/
