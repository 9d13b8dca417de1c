package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The bbolt v1.5 file layout, read here with plain reads (never through a memory map) so that a
// damaged file is recognised before bbolt maps it: a page beyond the end of the file faults when
// touched through the map (SIGBUS), and a garbled page makes bbolt panic or recurse without end.
//
// A page starts with a 16-byte header: id uint64, flags uint16, count uint16, overflow uint32. Pages
// 0 and 1 are meta pages; the meta follows the header: magic, version, page size and flags (uint32
// each), the root bucket (root page id and sequence, uint64 each), the freelist page id, the high
// water mark (pgid: the first page id past the data), the transaction id and an FNV-64a checksum of
// the 56 bytes before it. bbolt writes these fields in the machine's byte order.
const (
	pageHeaderSize   = 16
	elementSize      = 16 // a branch element (pos, ksize uint32; pgid uint64) or a leaf element (flags, pos, ksize, vsize uint32)
	bucketHeaderSize = 16 // root page id and sequence; an inline bucket's page follows it
	metaChecksumAt   = 56
	metaMagic        = 0xED0CDAED
	metaVersion      = 2
	branchPage       = 0x01
	leafPage         = 0x02
	freelistPage     = 0x10
	bucketElement    = 0x01
	noFreelist       = ^uint64(0)
	minPageSize      = 1 << 10
	maxPageSize      = 1 << 24 // the largest page size bbolt looks for
	// maxDepth bounds the B+tree walk; a real tree of this store is a few levels deep.
	maxDepth = 64
	// maxWholeRead is the largest file the walk reads at once rather than a page at a time.
	maxWholeRead = 64 << 20
)

var order = binary.NativeEndian

// damage describes what is wrong with a file; the caller adds the path (DamagedError).
type damage string

func (d damage) Error() string { return string(d) }

func damagef(format string, args ...any) error { return damage(fmt.Sprintf(format, args...)) }

// errEmpty: the file has no bytes; bbolt initialises such a file when it opens it for writing.
var errEmpty = errors.New("the file is empty")

// errNotBolt: neither meta slot holds bbolt's magic number, so this is no damaged database but some
// other file.
var errNotBolt = errors.New("not a bbolt database file")

type meta struct {
	pageSize uint64
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// parseMeta reads the meta of the page in b; ok reports a valid magic, version and checksum, and
// magic whether the magic number alone is there.
func parseMeta(b []byte) (m meta, ok, magic bool) {
	if len(b) < pageHeaderSize+metaChecksumAt+8 {
		return meta{}, false, len(b) >= pageHeaderSize+4 && order.Uint32(b[pageHeaderSize:]) == metaMagic
	}
	mb := b[pageHeaderSize:]
	if order.Uint32(mb[0:]) != metaMagic {
		return meta{}, false, false
	}
	h := fnv.New64a()
	_, _ = h.Write(mb[:metaChecksumAt])
	if order.Uint32(mb[4:]) != metaVersion || order.Uint64(mb[metaChecksumAt:]) != h.Sum64() {
		return meta{}, false, true
	}
	return meta{pageSize: uint64(order.Uint32(mb[8:])), root: order.Uint64(mb[16:]), freelist: order.Uint64(mb[32:]),
		pgid: order.Uint64(mb[40:]), txid: order.Uint64(mb[48:])}, true, true
}

// readAt reads len(b) bytes at off, or fewer at the end of the file.
func readAt(f io.ReaderAt, b []byte, off int64) ([]byte, error) {
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// inspect checks what bbolt relies on when it opens and maps the file: a valid meta page, pages
// that all lie inside the file, and a well-formed freelist. With deep it also walks every bucket's
// B+tree: each page inside the file, of the right type, referenced once, its elements inside it.
// It returns errEmpty, errNotBolt, a damage, or an I/O error.
func inspect(f *os.File, deep bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := uint64(fi.Size())
	if size == 0 {
		return errEmpty
	}
	m, err := pickMeta(f, size)
	if err != nil {
		return err
	}
	ps := m.pageSize
	switch {
	case size < 2*ps:
		return damagef("truncated: %d bytes, less than its two %d-byte header pages", size, ps)
	case m.pgid < 2 || m.pgid > size/ps:
		return damagef("truncated: %d bytes, but its pages reach byte %d", size, m.pgid*ps)
	case m.root < 2 || m.root >= m.pgid:
		return damagef("its root page %d lies outside its %d pages", m.root, m.pgid)
	}
	c := &checker{f: f, m: m, seen: map[uint64]bool{}}
	if deep && m.pgid*ps <= maxWholeRead {
		data, err := readAt(f, make([]byte, m.pgid*ps), 0)
		if err != nil {
			return err
		}
		if uint64(len(data)) < m.pgid*ps {
			return damagef("truncated while it was read: %d of %d bytes", len(data), m.pgid*ps)
		}
		c.data = data
	}
	if err := c.freelist(); err != nil {
		return err
	}
	if deep {
		return c.tree(m.root, 0)
	}
	return nil
}

// pickMeta returns the meta bbolt would use: the valid one with the higher transaction id. Like
// bbolt, it finds the page size in the first meta page, or else looks for the second one at every
// page size bbolt supports.
func pickMeta(f io.ReaderAt, size uint64) (meta, error) {
	buf := make([]byte, 4096)
	first, err := readAt(f, buf, 0)
	if err != nil {
		return meta{}, err
	}
	m0, ok0, magic0 := parseMeta(first)
	var m1 meta
	var ok1, magic1 bool
	if ok0 && m0.pageSize >= minPageSize && m0.pageSize <= maxPageSize && m0.pageSize&(m0.pageSize-1) == 0 && 2*m0.pageSize <= size {
		b, err := readAt(f, make([]byte, 4096), int64(m0.pageSize))
		if err != nil {
			return meta{}, err
		}
		m1, ok1, magic1 = parseMeta(b)
	} else {
		for ps := uint64(minPageSize); ps <= maxPageSize && ps < size; ps <<= 1 {
			b, err := readAt(f, make([]byte, 4096), int64(ps))
			if err != nil {
				return meta{}, err
			}
			m, ok, magic := parseMeta(b)
			magic1 = magic1 || magic
			if ok && m.pageSize == ps {
				m1, ok1 = m, true
				break
			}
		}
	}
	if ok0 && ok1 && m0.pageSize != m1.pageSize {
		return meta{}, damagef("its meta pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize)
	}
	var m meta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	case !magic0 && !magic1:
		return meta{}, errNotBolt
	case size < pageHeaderSize+metaChecksumAt+8:
		return meta{}, damagef("truncated: %d bytes, shorter than a meta page", size)
	default:
		return meta{}, damage("neither meta page passes its checksum")
	}
	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return meta{}, damagef("its meta page gives an impossible page size %d", m.pageSize)
	}
	return m, nil
}

// checker walks pages with plain reads: from data, the file's pages read at once, when it holds
// them, else one read a page.
type checker struct {
	f    io.ReaderAt
	data []byte
	m    meta
	seen map[uint64]bool
}

// page reads page id with its overflow pages, checking that they lie below the high water mark.
func (c *checker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= c.m.pgid {
		return nil, damagef("a reference to page %d, outside its %d pages", id, c.m.pgid)
	}
	ps := c.m.pageSize
	var first []byte
	if c.data != nil {
		first = c.data[id*ps : (id+1)*ps]
	} else {
		b, err := readAt(c.f, make([]byte, ps), int64(id*ps))
		if err != nil {
			return nil, err
		}
		if uint64(len(b)) < ps {
			return nil, damagef("page %d is cut short", id)
		}
		first = b
	}
	overflow := uint64(order.Uint32(first[12:]))
	if overflow >= c.m.pgid-id {
		return nil, damagef("page %d runs past its %d pages (overflow %d)", id, c.m.pgid, overflow)
	}
	if overflow == 0 {
		return first, nil
	}
	if c.data != nil {
		return c.data[id*ps : (id+overflow+1)*ps], nil
	}
	b, err := readAt(c.f, make([]byte, (overflow+1)*ps), int64(id*ps))
	if err != nil {
		return nil, err
	}
	if uint64(len(b)) < (overflow+1)*ps {
		return nil, damagef("page %d is cut short", id)
	}
	return b, nil
}

func (c *checker) freelist() error {
	id := c.m.freelist
	if id == noFreelist {
		return nil
	}
	p, err := c.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if flags := order.Uint16(p[8:]); flags != freelistPage {
		return damagef("its freelist page %d has type %#x, not a freelist", id, flags)
	}
	start, count := uint64(0), uint64(order.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return damagef("its freelist page %d is cut short", id)
		}
		start, count = 1, order.Uint64(p[pageHeaderSize:])
	}
	if count > uint64(len(p)-pageHeaderSize)/8-start {
		return damagef("its freelist page %d lists %d pages, more than it can hold", id, count)
	}
	for i := range count {
		free := order.Uint64(p[pageHeaderSize+(start+i)*8:])
		if free < 2 || free >= c.m.pgid {
			return damagef("its freelist names page %d, outside its %d pages", free, c.m.pgid)
		}
	}
	return nil
}

// tree checks the B+tree whose root is page id: every page inside the file and referenced once,
// every element inside its page, and, through bucket elements, the trees of nested buckets.
func (c *checker) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return damagef("its page tree is deeper than %d levels at page %d", maxDepth, id)
	}
	if c.seen[id] {
		return damagef("page %d is referenced twice", id)
	}
	p, err := c.page(id)
	if err != nil {
		return err
	}
	if got := order.Uint64(p[0:]); got != id {
		return damagef("page %d is marked as page %d", id, got)
	}
	for i := range uint64(len(p)) / c.m.pageSize {
		c.seen[id+i] = true
	}
	return c.elements(p, id, depth, false)
}

// elements checks the elements of page p: page id of the file, or an inline bucket's page inside it.
func (c *checker) elements(p []byte, id uint64, depth int, inline bool) error {
	if len(p) < pageHeaderSize {
		return damagef("an inline bucket in page %d is cut short", id)
	}
	flags, count := order.Uint16(p[8:]), uint64(order.Uint16(p[10:]))
	if inline && flags != leafPage {
		return damagef("an inline bucket in page %d has type %#x, not a leaf", id, flags)
	}
	if flags != branchPage && flags != leafPage {
		return damagef("page %d has type %#x where a branch or leaf page belongs", id, flags)
	}
	if flags == branchPage && count == 0 {
		return damagef("branch page %d has no elements", id)
	}
	if count > uint64(len(p)-pageHeaderSize)/elementSize {
		return damagef("page %d claims %d elements, more than it can hold", id, count)
	}
	for i := range count {
		at := uint64(pageHeaderSize) + i*elementSize
		e := p[at : at+elementSize]
		if flags == branchPage {
			pos, ksize := uint64(order.Uint32(e[0:])), uint64(order.Uint32(e[4:]))
			if at+pos+ksize > uint64(len(p)) {
				return damagef("a key of branch page %d lies outside it", id)
			}
			if err := c.tree(order.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
			continue
		}
		ef, pos, ksize, vsize := order.Uint32(e[0:]), uint64(order.Uint32(e[4:])), uint64(order.Uint32(e[8:])), uint64(order.Uint32(e[12:]))
		end := at + pos + ksize + vsize
		if end > uint64(len(p)) {
			return damagef("a value of leaf page %d lies outside it", id)
		}
		if ef&bucketElement == 0 {
			continue
		}
		v := p[at+pos+ksize : end]
		if len(v) < bucketHeaderSize {
			return damagef("a bucket header in leaf page %d is cut short", id)
		}
		if root := order.Uint64(v); root != 0 {
			if err := c.tree(root, depth+1); err != nil {
				return err
			}
			continue
		}
		if depth > maxDepth {
			return damagef("its buckets nest deeper than %d levels at page %d", maxDepth, id)
		}
		if err := c.elements(v[bucketHeaderSize:], id, depth+1, true); err != nil {
			return err
		}
	}
	return nil
}
