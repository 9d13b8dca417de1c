package gitref

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// docFile is the one blob of a document's commit.
const docFile = "doc.json"

// signature is the author and committer of every commit the Store writes.
func signature(at time.Time) object.Signature {
	return object.Signature{Name: "latestwins", Email: "latestwins@localhost", When: at.UTC().Truncate(time.Second)}
}

func blobObject(data []byte) plumbing.EncodedObject {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	_, _ = o.Write(data) // a MemoryObject's Write does not fail
	return o
}

// treeObject encodes a tree of entries, which it sorts (every name here has the same kind of
// entry, so plain string order is git's order).
func treeObject(entries []object.TreeEntry) (plumbing.EncodedObject, error) {
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(a.Name, b.Name) })
	o := &plumbing.MemoryObject{}
	if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
		return nil, fmt.Errorf("encode tree: %w", err)
	}
	return o, nil
}

// commitObject encodes a commit of tree on parent (zero: none) with message.
func commitObject(tree, parent plumbing.Hash, message string, at time.Time) (plumbing.EncodedObject, error) {
	c := &object.Commit{Author: signature(at), Committer: signature(at), Message: message, TreeHash: tree}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	o := &plumbing.MemoryObject{}
	if err := c.Encode(o); err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	return o, nil
}

// docObjects are the blob, tree and commit of one document write.
func docObjects(data []byte, parent plumbing.Hash, message string, at time.Time) (commit plumbing.Hash, objs []plumbing.EncodedObject, err error) {
	blob := blobObject(data)
	tree, err := treeObject([]object.TreeEntry{{Name: docFile, Mode: filemode.Regular, Hash: blob.Hash()}})
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	c, err := commitObject(tree.Hash(), parent, message, at)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	return c.Hash(), []plumbing.EncodedObject{blob, tree, c}, nil
}

// readDoc reads the document blob of commit h from st, the commit's parent, and what the commit
// says of its ref's history.
func readDoc(st storer.EncodedObjectStorer, h plumbing.Hash) (data []byte, parent plumbing.Hash, hist history, err error) {
	c, err := object.GetCommit(st, h)
	if err != nil {
		return nil, plumbing.ZeroHash, hist, fmt.Errorf("read commit %s: %w", h, err)
	}
	if len(c.ParentHashes) > 0 {
		parent = c.ParentHashes[0]
	}
	hist = parseHistory(c.Message)
	t, err := object.GetTree(st, c.TreeHash)
	if err != nil {
		return nil, parent, hist, fmt.Errorf("read tree of commit %s: %w", h, err)
	}
	e, err := t.FindEntry(docFile)
	if err != nil {
		return nil, parent, hist, fmt.Errorf("commit %s holds no %s: %w", h, docFile, err)
	}
	data, err = readBlob(st, e.Hash)
	return data, parent, hist, err
}

func readBlob(st storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	o, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return b, nil
}
