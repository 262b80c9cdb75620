package slurmlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Build runs `make build data` in the repository, so the lab's PATH (the
// repo's bin/ first) and plugstack.conf (bin/easyscale_spank.so) hold
// binaries of the code under test, and jobs started in the repository root
// find MNIST in data/mnist without a Go toolchain. Test packages call it from TestMain before Main;
// concurrent callers (go test runs packages in parallel) are serialised by
// a lock file. Without EASYSCALE_LAB=1 ([Enabled]) it does nothing and returns nil:
// only lab tests need bin/ built. In the current lab's root ([InRoot]), which has no Go
// toolchain, it builds nothing and checks that bin/easyscale is there: `make
// test-current` builds bin/ on the host before it runs the tests in the root.
func Build() error {
	if !Enabled() {
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if InRoot() {
		if _, err := os.Stat(filepath.Join(root, "bin", "easyscale")); err != nil {
			return fmt.Errorf("in the current lab's root, which has no Go, bin/ must be built on the host first (make test-current does): %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(root, "bin", ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening the build lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("taking the build lock: %w", err)
	}
	cmd := exec.Command("make", "--no-print-directory", "build", "data")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make build data: %w\n%s", err, out)
	}
	return nil
}
