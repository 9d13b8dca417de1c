# shellcheck shell=bash
# Sourced by scripts/mutants: the exhaustive check of the per-scope layout's accept and gate
# protocol (internal/layoutmodel) must fail when the protocol it checks is broken, or when its own
# checks are.

mutant "under the fresh-head protocol a gate decides without reading the head" internal/layoutmodel/model.go \
  's/if \(c\.p == FreshHead && c\.m != RememberedHead\) \|\| a\.recovery \{/if a.recovery {/' \
  TestProtocolsKeepMultiScopeAcceptsAllOrNone ./internal/layoutmodel/
mutant "an accepter's head write ignores a voided reservation" internal/layoutmodel/model.go \
  's/if a\.head\.voided&\(1<<i\) != 0 \{/if false \&\& a.head.voided\&(1<<i) != 0 {/' \
  TestProtocolsKeepMultiScopeAcceptsAllOrNone ./internal/layoutmodel/
mutant "the check never compares a gate with what ended before it" internal/layoutmodel/model.go \
  's/if a\.after&\(1<<j\) == 0 \{/if true || a.after\&(1<<j) == 0 {/' \
  TestTheCheckCatchesBrokenProtocols ./internal/layoutmodel/
mutant "the writer after a crash (the sweep, a later accept) does not read the head" internal/layoutmodel/model.go \
  's/if \(c\.p == FreshHead && c\.m != RememberedHead\) \|\| a\.recovery \{/if c.p == FreshHead \&\& c.m != RememberedHead {/' \
  TestProtocolsKeepMultiScopeAcceptsAllOrNone ./internal/layoutmodel/
mutant "the counter check lets a scope apply an older generation after a newer one" internal/layoutmodel/counter.go \
  's/\tif gen <= d\.top \{/\tif false \&\& gen <= d.top {/' \
  TestTheCounterCheckCatchesBrokenProtocols ./internal/layoutmodel/
mutant "under the counter protocol an accept of several scopes fills its entry with a generation older than its predecessor's" internal/layoutmodel/counter.go \
  's/\t\tcase a\.gen <= c\.before\(a\.head, k\):/\t\tcase false:/' \
  TestCounterKeepsEachScopeInOrder ./internal/layoutmodel/
