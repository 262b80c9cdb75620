package datasets

// InstallDir is the directory `make install` copies the data sets into
// ($(DATADIR)/easyscale/data: mnist/ and charlm/ below it), stamped into the
// binary with -ldflags "-X ...runtime/datasets.InstallDir=DIR". Empty (the
// default of a plain `go build`) means there is no installed copy to look at.
var InstallDir string
