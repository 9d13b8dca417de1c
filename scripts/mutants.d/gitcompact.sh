# shellcheck shell=bash
# Sourced by scripts/mutants: the git store's refs are compacted (a write past the bound is a root
# commit), a lost answer is settled by the writes the stored commit names, and the sweep deletes
# expired records from the records refs, each under the server's compare-and-swap.

G=internal/store/gitref
mutant "the git store settles a lost answer by walking parents only, not by the writes a commit names" $G/gitref.go \
  's/if named, ok := hist\.covers\(rev\); ok \{/if named, ok := hist.covers(rev); false \&\& ok {/' \
  "TestLostAnswersAcrossCompaction/applied, then compacted" ./$G/
mutant "the git store takes the write a commit names at its revision for its own without comparing" $G/gitref.go \
  's/if named == commit \{/if named == commit || true {/' \
  "TestLostAnswersAcrossCompaction/lost to another write, then compacted" ./$G/
mutant "the git store takes a write compacted past for a conflict" $G/gitref.go \
  's/return 0, fmt\.Errorf\("revision %d is older than what revision %d names: %w", rev, d\.Rev, errCompacted\)/return moved, nil/' \
  "TestLostAnswersAcrossCompaction/compacted past the write" ./$G/
mutant "a compacted root names none of the writes before it" $G/gitref.go \
  's/after: kept\(old\.rev, old\.hash, old\.hist\.after, s\.keep\)/after: kept(old.rev, parent, old.hist.after, s.keep)/' \
  "TestLostAnswersAcrossCompaction/applied, then compacted" ./$G/
mutant "no ref is ever compacted" $G/compact.go \
  's/case h\.chain == 0 \|\| h\.chain >= every:/case false:/' \
  TestHistoryStaysBounded ./$G/
mutant "a records ref is never compacted" $G/records.go \
  's/parent, chain := history\{chain: g\.chain\}\.next\(g\.tip, every\)/parent, chain := g.tip, g.chain+1/' \
  TestHistoryStaysBounded ./$G/
mutant "a compacting write names its commit's parent as the ref's old id, not the commit it was computed from" $G/gitref.go \
  's/updates := \[\]Update\{\{Name: ref, Old: old\.hash, New: commit\}\}/updates := []Update{{Name: ref, Old: parent, New: commit}}/' \
  "TestCompactionRacesAWriter/compacting first" ./$G/
mutant "a read over HTTP gives up when a compaction made the commit it saw unreachable" $G/transport.go \
  's/if !errors\.Is\(err, errNotOurRef\) \|\| attempt == fetchAttempts \{/if true {/' \
  TestReadAcrossACompaction ./$G/
mutant "the git store's expiry deletes records at their expiry instant" $G/expire.go \
  's/r\.ExpiresAt\.Before\(now\)/!r.ExpiresAt.After(now)/' \
  TestDeleteExpired ./$G/
mutant "the git store's expiry leaves the expired records in the ref's history" $G/expire.go \
  's/o, err := ng\.commit\(plumbing\.ZeroHash, 1, at\)/o, err := ng.commit(g.tip, g.chain+1, at)/' \
  TestDeleteExpired ./$G/
mutant "the git store's expiry pushes on the stale records ref again after a refusal" $G/expire.go \
  's/if err := s\.refresh\(ctx, \[\]string\{name\}\); err != nil \{/if err := error(nil); err != nil {/' \
  TestExpiryRacesARecordsWriter ./$G/
mutant "the git store's expiry deletes nothing" $G/expire.go \
  's/\t\tif len\(expired\) == 0 \{/\t\tif true {/' \
  TestSweepDeletesExpiredRecords ./$G/
