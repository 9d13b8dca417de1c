# shellcheck shell=bash
# Sourced by scripts/mutants: every store's counter (authority.Store's Add) is one atomic step,
# a read and a write that nothing comes between, and a value is handed to one caller only, also
# when an answer is lost and the addition made again.

# A real store's read and write are requests apart, which the scheduler stands in for here: the
# memory store's own lock hands itself back before a waiter runs.
mutant "the memory store's counter reads and writes under two locks, a round trip apart" internal/store/memory/memory.go \
  's/\t"sync"\n/\t"runtime"\n\t"sync"\n/; s/\ts\.mu\.Lock\(\)\n\tdefer s\.mu\.Unlock\(\)\n\ts\.counts\[key\] \+= delta\n\treturn s\.counts\[key\], nil\n/\ts.mu.Lock()\n\tn := s.counts[key] + delta\n\ts.mu.Unlock()\n\truntime.Gosched()\n\ts.mu.Lock()\n\tdefer s.mu.Unlock()\n\ts.counts[key] = n\n\treturn n, nil\n/' \
  TestConformance/Counter/Concurrent

B=internal/store/bolt/bolt.go
mutant "the bolt store's counter reads in one transaction and writes in another" $B \
  's/(\terr := s\.write\(ctx, false, false, func\(tx \*bbolt\.Tx\) error \{\n\t\tb, err := tx\.CreateBucketIfNotExists\(bucketCounters\))/\tvar before int64\n\t_ = s.read(ctx, func(tx *bbolt.Tx) error { before, _ = counter(tx.Bucket(bucketCounters), key); return nil })\n$1/; s/\t\tcur, err := counter\(b, key\)\n/\t\tcur, err := before, error(nil)\n/' \
  TestCounterAcrossStores ./internal/store/bolt/
mutant "the bolt store's counter commits nothing" $B \
  's/(\t\tif err := b\.Put\(\[\]byte\(key\), strconv\.AppendInt\(nil, n, 10\)\); err != nil \{\n\t\t\treturn fmt\.Errorf\("write counter: %w", err\)\n\t\t\}\n\t\treturn )nil/$1errNoChange/' \
  TestCounterSurvivesReopening ./internal/store/bolt/

D=internal/store/dynamo/dynamo.go
mutant "the DynamoDB store's counter is a GetItem and an unconditional PutItem" $D \
  's/\tout, err := s\.api\.UpdateItem\(ctx, &dynamodb\.UpdateItemInput\{.*?\n\t\}\)\n/\tvar out *dynamodb.UpdateItemOutput\n\tcur, err := s.Add(ctx, key, 0)\n\tif err == nil {\n\t\titem := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}, attrCount: number(cur + delta)}\n\t\t_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})\n\t\tout = &dynamodb.UpdateItemOutput{Attributes: item}\n\t}\n/s' \
  TestCounterAcrossClients ./internal/store/dynamo/

G=internal/store/gitref/counter.go
mutant "the git store's counter pushes without the compare (over whatever the ref holds)" $G \
  's/\[\]Update\{\{Name: ref, Old: cur\.hash, New: commit\}\}/[]Update{{Name: ref, Old: func() plumbing.Hash { c, _ := s.readCounter(ctx, key, ref); return c.hash }(), New: commit}}/' \
  TestCounterUnderFaults ./internal/store/gitref/
mutant "the git store takes a counter push without an answer for a success" $G \
  's/\t\tif perr == nil \{\n/\t\tif perr == nil || !errors.As(perr, new(*RefusedError)) {\n/' \
  TestCounterUnderFaults ./internal/store/gitref/
