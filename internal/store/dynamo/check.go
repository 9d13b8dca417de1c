package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrNotMigrated is the category of *NotMigratedError: the table lacks what Migrate gives it.
var ErrNotMigrated = errors.New("table not migrated")

// NotMigratedError lists what Migrate would do to the table: create it, add the pending index,
// record the schema version.
type NotMigratedError struct {
	Table string
	Needs []string
}

func (e *NotMigratedError) Error() string {
	return fmt.Sprintf("table %s needs migrating (%s): run latestwins migrate with this store", e.Table, strings.Join(e.Needs, "; "))
}

// Is matches ErrNotMigrated.
func (e *NotMigratedError) Is(target error) bool { return target == ErrNotMigrated }

// Check reads the table's layout as Migrate finds it and changes nothing. It returns the report a
// Migrate that has nothing to do would give (with TTLOff when time to live is off). A table Migrate
// would change in its keys, index or schema version is a *NotMigratedError
// (errors.Is(err, ErrNotMigrated)) that says what it would do; a table Migrate refuses (another key
// schema, time to live on another attribute, a newer schema version) is Migrate's error; a server
// that does not answer is the request's error.
func (s *Store) Check(ctx context.Context) (*MigrateReport, error) {
	if s.tables == nil || s.ttl == nil {
		return nil, fmt.Errorf("check table %s: the client given to the store cannot describe tables (pass a *dynamodb.Client, or use WithAdmin)", s.table)
	}
	rep := &MigrateReport{Table: s.table}
	desc, err := s.describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("check table %s: %w", s.table, err)
	}
	if desc == nil {
		return nil, &NotMigratedError{Table: s.table, Needs: []string{"there is no such table: migrate creates it"}}
	}
	if desc.TableStatus != types.TableStatusActive {
		return nil, fmt.Errorf("check table %s: the table is %s, not ACTIVE; wait for it, or see why in the AWS console", s.table, desc.TableStatus)
	}
	if err := checkKeySchema(desc); err != nil {
		return nil, fmt.Errorf("check table %s: %w", s.table, err)
	}
	var needs []string
	if idx := findIndex(desc, PendingIndex); idx == nil {
		needs = append(needs, "no index "+PendingIndex+": migrate adds it")
	} else if err := checkIndex(idx); err != nil {
		return nil, fmt.Errorf("check table %s: %w", s.table, err)
	}
	ttl, err := s.checkTTL(ctx)
	if err != nil {
		return nil, fmt.Errorf("check table %s: %w", s.table, err)
	}
	// Time to live off is not a layout Migrate must fix: records that do not expire cost room, not
	// correctness, and a local server may describe time to live without letting Migrate turn it on.
	rep.TTL = cmp.Or(ttl, TTLOff)
	if rep.SchemaVersion, err = s.storedSchema(ctx); err != nil {
		return nil, fmt.Errorf("check table %s: %w", s.table, err)
	}
	switch {
	case rep.SchemaVersion == 0:
		needs = append(needs, "no schema version recorded: migrate records "+strconv.FormatInt(SchemaVersion, 10))
	case rep.SchemaVersion < SchemaVersion:
		needs = append(needs, fmt.Sprintf("schema version %d: migrate moves it to %d", rep.SchemaVersion, SchemaVersion))
	case rep.SchemaVersion > SchemaVersion:
		return nil, fmt.Errorf("check table %s: schema version %d, this latestwins knows %d: upgrade latestwins", s.table, rep.SchemaVersion, SchemaVersion)
	}
	if len(needs) > 0 {
		return nil, &NotMigratedError{Table: s.table, Needs: needs}
	}
	return rep, nil
}

// TTLOff is what Check reports of a table whose time to live is off: Migrate turns it on where the
// server lets it.
const TTLOff TTLStatus = "off (latestwins migrate turns it on where the server lets it)"

// checkTTL says whether time to live is on TTLAttribute: enabled or enabling, unsupported by the
// server, or "" when it is off. On another attribute, or being disabled, it is Migrate's error.
func (s *Store) checkTTL(ctx context.Context) (TTLStatus, error) {
	out, err := s.ttl.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if _, ok := unsupported(err); ok {
		return TTLUnsupported, nil
	}
	if err != nil {
		return "", fmt.Errorf("describe time to live: %w", err)
	}
	d := out.TimeToLiveDescription
	if d == nil {
		return "", nil
	}
	switch d.TimeToLiveStatus {
	case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
		if attr := aws.ToString(d.AttributeName); attr != TTLAttribute {
			return "", fmt.Errorf("time to live is on attribute %q; latestwins expires items by %q and a table has one TTL attribute: disable it, then run migrate", attr, TTLAttribute)
		}
		if d.TimeToLiveStatus == types.TimeToLiveStatusEnabling {
			return TTLEnabling, nil
		}
		return TTLEnabled, nil
	case types.TimeToLiveStatusDisabling:
		return "", errors.New("time to live is being disabled; run migrate once that has finished")
	}
	return "", nil
}

// storedSchema reads the recorded schema version; 0 when none is.
func (s *Store) storedSchema(ctx context.Context) (int64, error) {
	item, err := s.read(ctx, schemaKey)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if item == nil {
		return 0, nil
	}
	n, ok := item[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("item %s has no numeric %q", schemaKey, attrVersion)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("item %s: %q: %w", schemaKey, attrVersion, err)
	}
	return v, nil
}
