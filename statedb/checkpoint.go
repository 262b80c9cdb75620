package statedb

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nlpodyssey/safetensors"
)

// ESTContext is the serialised context of one logical worker (EST) at a
// checkpoint's step: generator position, sampler cursor, BatchNorm buffers,
// as encoded by the runtime. statedb stores Blob without looking into it.
type ESTContext struct {
	EST  int
	Blob []byte
}

// Checkpoint is a loaded checkpoint.
type Checkpoint struct {
	Step     int64
	Path     string // absolute path of the safetensors file
	SHA256   string // hex SHA-256 of the file
	Tensors  []Tensor
	Contexts []ESTContext // ordered by EST
	Meta     map[string]string
	// Raw is the file's content when an engine encoded it itself
	// (SaveCheckpointFile; Meta[MetaEngine] names the engine); Tensors is
	// then empty.
	Raw []byte
}

// checkpointFile is what SaveCheckpoint writes into; tests inject failing
// ones to simulate a full disk.
type checkpointFile interface {
	io.Writer
	Sync() error
	Close() error
}

func createFile(path string) (checkpointFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}

// checkpointName is the file name of step's checkpoint under DIR/checkpoints.
func checkpointName(step int64) string { return fmt.Sprintf("step-%d.safetensors", step) }

var checkpointFileRE = regexp.MustCompile(`^step-[0-9]+\.safetensors$`)

// SaveCheckpoint durably stores the model state after step: tensors go to
// DIR/checkpoints/step-<step>.safetensors (written as a .tmp file, fsynced,
// renamed, directory fsynced), and only then are the file's step, name,
// SHA-256 and size and the EST contexts recorded in one immediate
// transaction, committed with synchronous=FULL. Afterwards all but the
// newest Options.KeepCheckpoints checkpoints are dropped: their rows in that
// same transaction, their files after the commit. Saving a step that already
// has a checkpoint replaces it.
//
// Any failure (a full disk included) returns a wrapped error, removes the
// partial file and leaves the previously recorded checkpoints untouched.
// Invalid tensors (shape/data mismatch, duplicate or empty names), meta keys
// starting with ReservedMetaPrefix, and negative or repeated EST numbers wrap
// ErrInvalid.
func (db *DB) SaveCheckpoint(step int64, tensors []Tensor, contexts []ESTContext, meta map[string]string) error {
	if err := db.writable("saving checkpoint"); err != nil {
		return err
	}
	ctxs, err := validateCheckpoint(step, tensors, contexts, meta)
	if err != nil {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, err)
	}
	return db.saveFile(step, func(w io.Writer) error {
		return encodeCheckpoint(w, step, tensors, meta)
	}, ctxs)
}

// saveFile writes a checkpoint file with encode, then records it with its
// contexts and prunes old checkpoints (see SaveCheckpoint).
func (db *DB) saveFile(step int64, encode func(io.Writer) error, ctxs []ESTContext) error {
	var existed bool
	if err := db.sql.QueryRow(`SELECT COUNT(*) > 0 FROM checkpoints WHERE step = ?`, step).Scan(&existed); err != nil {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, err)
	}
	name := checkpointName(step)
	final := filepath.Join(db.dir, CheckpointDir, name)
	sum, size, err := db.writeFile(final, encode)
	if err != nil {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, err)
	}
	pruned, err := db.recordCheckpoint(step, name, sum, size, ctxs)
	if err != nil {
		if !existed {
			os.Remove(final) // unrecorded; Open would remove it too
		}
		return fmt.Errorf("saving checkpoint of step %d: recording it in %s: %w", step, DBFile, err)
	}
	for _, f := range pruned {
		// Best effort: the rows are gone, and Open removes files
		// that no row records.
		os.Remove(filepath.Join(db.dir, CheckpointDir, f))
	}
	return nil
}

// SaveCheckpointFile records a checkpoint whose file an engine encoded
// itself: data is a safetensors file of any dtypes (the torch engine's
// parameters, optimizer and scheduler state) whose metadata holds
// MetaEngine and "easyscale.step" = step. It is written, hashed, recorded
// and pruned exactly as SaveCheckpoint's files are, with the same errors;
// a file that is not such a safetensors file wraps ErrInvalid.
func (db *DB) SaveCheckpointFile(step int64, data []byte, contexts []ESTContext) error {
	if err := db.writable("saving checkpoint"); err != nil {
		return err
	}
	if step < 0 {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, invalidf("step is %d, want >= 0", step))
	}
	if _, err := checkFileHeader(data, step); err != nil {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, invalidf("%v", err))
	}
	ctxs, err := sortedContexts(contexts)
	if err != nil {
		return fmt.Errorf("saving checkpoint of step %d: %w", step, err)
	}
	return db.saveFile(step, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, ctxs)
}

func validateCheckpoint(step int64, tensors []Tensor, contexts []ESTContext, meta map[string]string) ([]ESTContext, error) {
	if step < 0 {
		return nil, invalidf("step is %d, want >= 0", step)
	}
	if err := validateTensors(tensors); err != nil {
		return nil, err
	}
	if err := validateMeta(meta); err != nil {
		return nil, err
	}
	return sortedContexts(contexts)
}

// writeFile writes final atomically and durably: encode into final.tmp,
// fsync it, rename it over final, fsync the directory. It returns the hex
// SHA-256 and size of what was written. On error no .tmp file is left and
// final is untouched unless the rename already happened (then it is
// removed).
func (db *DB) writeFile(final string, encode func(io.Writer) error) (sum string, size int64, err error) {
	tmp := final + ".tmp"
	f, err := db.create(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("creating %s: %w", tmp, err)
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err = encode(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", 0, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", 0, fmt.Errorf("renaming %s: %w", tmp, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		os.Remove(final)
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s to fsync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsyncing directory %s: %w", dir, err)
	}
	return nil
}

// recordCheckpoint records the checkpoint and prunes old ones in one
// immediate transaction, committed with synchronous=FULL so that the WAL is
// on disk before any pruned file is deleted. It returns the pruned files.
func (db *DB) recordCheckpoint(step int64, name, sum string, size int64, ctxs []ESTContext) (pruned []string, err error) {
	ctx := context.Background()
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return nil, err
	}
	defer conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if pruned, err = recordCheckpointTx(tx, step, name, sum, size, ctxs, db.keep); err != nil {
		return nil, err
	}
	return pruned, tx.Commit()
}

func recordCheckpointTx(tx *sql.Tx, step int64, name, sum string, size int64, ctxs []ESTContext, keep int) ([]string, error) {
	if _, err := tx.Exec(`DELETE FROM est_contexts WHERE step = ?`, step); err != nil {
		return nil, err
	}
	row := []any{step, name, sum, size, time.Now().UnixNano()}
	stored := make([][2]any, len(ctxs))
	for i, c := range ctxs {
		stored[i] = [2]any{int64(c.EST), orEmpty(c.Blob)}
	}
	if _, err := tx.Exec(`INSERT OR REPLACE INTO checkpoints (step, file, sha256, size, time_ns, checksum) VALUES (?,?,?,?,?,?)`,
		append(row, checkpointChecksum(row, stored))...); err != nil {
		return nil, err
	}
	for _, c := range stored {
		if _, err := tx.Exec(`INSERT INTO est_contexts (step, est, blob) VALUES (?,?,?)`, step, c[0], c[1]); err != nil {
			return nil, err
		}
	}
	old, err := queryStrings(tx, `SELECT file FROM checkpoints ORDER BY step DESC LIMIT -1 OFFSET ?`, keep)
	if err != nil {
		return nil, err
	}
	_, err = tx.Exec(`DELETE FROM est_contexts WHERE step NOT IN (SELECT step FROM checkpoints ORDER BY step DESC LIMIT ?);
		DELETE FROM checkpoints WHERE step NOT IN (SELECT step FROM checkpoints ORDER BY step DESC LIMIT ?)`, keep, keep)
	return old, err
}

func queryStrings(q interface {
	Query(string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]string, error) {
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

type checkpointRecord struct {
	step      int64
	file, sum string
	size      int64
	contexts  []ESTContext
}

// LatestCheckpoint loads the newest recorded checkpoint whose rows match
// their checksum (the checkpoints row and its est_contexts rows, see
// checksum.go) and whose file exists, has the recorded SHA-256 and parses.
// Each newer checkpoint it had to skip is reported in skipped as a
// *CheckpointError naming the file; its Err is a *CorruptRowError
// (matching ErrCorruptRow) when the rows were changed, wraps
// ErrChecksumMismatch for a file checksum or size mismatch, fs.ErrNotExist
// for a missing file. It returns (nil, skipped, nil) when no checkpoint is
// usable, and a non-nil err only when the database itself cannot be read.
func (db *DB) LatestCheckpoint() (cp *Checkpoint, skipped []error, err error) {
	stored, err := checkpointRows(db.sql)
	if err != nil {
		return nil, nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	for _, s := range stored {
		r, cerr := db.checkedRecord(s)
		if cerr == nil {
			cp, cerr = db.loadCheckpoint(r)
		}
		if errors.As(cerr, new(*CheckpointError)) {
			skipped = append(skipped, cerr)
			continue
		}
		if cerr != nil {
			return nil, skipped, cerr
		}
		cp.Contexts = r.contexts
		return cp, skipped, nil
	}
	return nil, skipped, nil
}

// checkedRecord reads the EST contexts of a stored checkpoints row and
// checks both against the row's checksum. A mismatch is a *CheckpointError
// wrapping a *CorruptRowError; other errors are database read failures.
func (db *DB) checkedRecord(s storedCheckpoint) (checkpointRecord, error) {
	step, _ := s.row[0].(int64) // INTEGER PRIMARY KEY: always an integer
	ctxs, err := contextRows(db.sql, step)
	if err != nil {
		return checkpointRecord{}, fmt.Errorf("reading EST contexts of checkpoint %d: %w", step, err)
	}
	want, _ := s.sum.(string)
	file, _ := s.row[1].(string)
	path := filepath.Join(db.dir, CheckpointDir, filepath.Base(file))
	if got := checkpointChecksum(s.row, ctxs); got != want {
		sha, _ := s.row[2].(string)
		return checkpointRecord{}, &CheckpointError{Step: step, Path: path, WantSHA256: sha,
			Err: &CorruptRowError{Dir: db.dir, Table: "checkpoints", Step: step, Want: want, Got: got}}
	}
	d := storedValues{values: s.row, names: []string{"step", "file", "sha256", "size", "time_ns"}}
	r := checkpointRecord{step: step, file: d.str(1), sum: d.str(2), size: d.int(3)}
	for _, c := range ctxs {
		cd := storedValues{values: c[:], names: []string{"est", "blob"}}
		est := cd.int(0)
		blob := []byte(cd.str(1))
		if cd.err != nil && d.err == nil {
			d.err = cd.err
		}
		r.contexts = append(r.contexts, ESTContext{EST: int(est), Blob: blob})
	}
	if d.err != nil {
		return checkpointRecord{}, &CheckpointError{Step: step, Path: path, WantSHA256: r.sum,
			Err: fmt.Errorf("decoding its rows in %s: %w", DBFile, d.err)}
	}
	return r, nil
}

func (db *DB) loadCheckpoint(r checkpointRecord) (*Checkpoint, error) {
	path := filepath.Join(db.dir, CheckpointDir, filepath.Base(r.file))
	fail := func(got string, err error) error {
		return &CheckpointError{Step: r.step, Path: path, WantSHA256: r.sum, GotSHA256: got, Err: err}
	}
	b, got, err := readHashed(path, r.size)
	if err != nil {
		return nil, fail(got, err)
	}
	if got != r.sum {
		return nil, fail(got, ErrChecksumMismatch)
	}
	if _, md, err := safetensors.ReadMetadata(b); err == nil && md.Metadata()[MetaEngine] != "" {
		meta, err := checkFileHeader(b, r.step)
		if err != nil {
			return nil, fail(got, err)
		}
		return &Checkpoint{Step: r.step, Path: path, SHA256: got, Meta: meta, Raw: b}, nil
	}
	step, tensors, meta, err := decodeCheckpoint(b)
	if err != nil {
		return nil, fail(got, err)
	}
	if step != r.step {
		return nil, fail(got, fmt.Errorf("file holds step %d", step))
	}
	return &Checkpoint{Step: r.step, Path: path, SHA256: got, Tensors: tensors, Meta: meta}, nil
}

// readHashed reads path when its size is the recorded one and returns its
// bytes and hex SHA-256; otherwise it only hashes the file (without loading
// it) and returns an error wrapping ErrChecksumMismatch.
func readHashed(path string, size int64) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	if st.Size() != size {
		if _, err := io.Copy(h, f); err != nil {
			return nil, "", err
		}
		return nil, hex.EncodeToString(h.Sum(nil)),
			fmt.Errorf("%w: file has %d bytes, %d recorded", ErrChecksumMismatch, st.Size(), size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, "", err
	}
	h.Write(b)
	return b, hex.EncodeToString(h.Sum(nil)), nil
}

// cleanCheckpointDir removes what interrupted SaveCheckpoint calls left
// behind: step-*.safetensors.tmp files, and step-*.safetensors files that no
// row records (renamed but not recorded, or pruned but not yet deleted).
// Other files are left alone.
func (db *DB) cleanCheckpointDir() error {
	dir := filepath.Join(db.dir, CheckpointDir)
	recorded, err := queryStrings(db.sql, `SELECT file FROM checkpoints`)
	if err != nil {
		return fmt.Errorf("listing recorded checkpoints: %w", err)
	}
	keep := make(map[string]bool, len(recorded))
	for _, f := range recorded {
		keep[f] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		stale := checkpointFileRE.MatchString(strings.TrimSuffix(name, ".tmp")) &&
			(strings.HasSuffix(name, ".tmp") || !keep[name])
		if !stale || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing leftover checkpoint file: %w", err)
		}
	}
	return nil
}
