package torchengine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// userPackageRoot returns the directory this user's processes extract the
// embedded package under (see Extract): easyscale/python in the user cache
// directory ($XDG_CACHE_HOME, else $HOME/.cache), else in the .cache of
// the home directory the password database gives for this uid, else
// $TMPDIR/easyscale-UID/python. $HOME may name another user's home (an
// extra job that easyscale-backfilld, root, submitted with sbatch --uid
// ran with the daemon's environment, HOME=/root, before the daemon
// exported only its PATH; a user may set any HOME). The error names every
// directory tried and why it was passed over.
func userPackageRoot() (string, error) {
	uid := os.Getuid()
	var bases []string
	if d, err := os.UserCacheDir(); err == nil {
		bases = append(bases, d)
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.HomeDir != "" {
		bases = append(bases, filepath.Join(u.HomeDir, ".cache"))
	}
	return packageRoot(uid, bases, filepath.Join(os.TempDir(), "easyscale-"+strconv.Itoa(uid)))
}

// packageRoot decides userPackageRoot for uid: easyscale/python under the
// first of bases that is, with those two directories, uid's own (see
// ownDir; what is missing is created, a missing base only in a directory
// of uid); else python under private, created with mode 0700 when
// missing, which must then be uid's own too. Another
// user's directory, or one that others may write, is never used: the
// Python processes import from it.
func packageRoot(uid int, bases []string, private string) (string, error) {
	var why []string
	for _, b := range bases {
		root := filepath.Join(b, "easyscale", "python")
		if _, err := os.Stat(b); errors.Is(err, fs.ErrNotExist) {
			if err := ownDir(filepath.Dir(b), uid); err != nil {
				why = append(why, err.Error())
				continue
			}
			if err := os.Mkdir(b, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				why = append(why, err.Error())
				continue
			}
		}
		if err := ownTree(uid, b, root, "easyscale", "python"); err != nil {
			why = append(why, err.Error())
			continue
		}
		return root, nil
	}
	if err := os.Mkdir(private, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		why = append(why, err.Error())
	} else if err := ownTree(uid, private, filepath.Join(private, "python"), "python"); err != nil {
		why = append(why, err.Error())
	} else {
		return filepath.Join(private, "python"), nil
	}
	return "", fmt.Errorf("finding a directory of this user (uid %d) to extract the easyscale Python package into: %s; "+
		"set HOME or XDG_CACHE_HOME to a directory of this user", uid, strings.Join(why, "; "))
}

// ownTree checks that base is uid's own, creates root (base followed by
// the elements below) when missing and checks that every directory below
// base down to root is uid's own.
func ownTree(uid int, base, root string, below ...string) error {
	if err := ownDir(base, uid); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	dir := base
	for _, e := range below {
		dir = filepath.Join(dir, e)
		if err := ownDir(dir, uid); err != nil {
			return err
		}
	}
	return nil
}

// ownDir reports why path is not a directory that belongs to uid and that
// neither its group nor others may write (nil when it is).
func ownDir(path string, uid int) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !ok:
		return fmt.Errorf("%s: no owner known", path)
	case int(st.Uid) != uid:
		return fmt.Errorf("%s belongs to uid %d", path, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by its group or others (mode %04o)", path, fi.Mode().Perm())
	}
	return nil
}
