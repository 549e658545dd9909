package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/spf13/pflag"
)

// downloadUsage is the help of --download (train and eval).
const downloadUsage = "--dataset cifar10: download cifar-10-binary.tar.gz (170 MB, checked against its published MD5 and SHA-256) into --data-dir " +
	"(default: the cache) and extract its batches, when they are not there yet; without it nothing is downloaded (an archive already there is checked and extracted)"

// addDownloadFlag registers --download.
func addDownloadFlag(fs *pflag.FlagSet, download *bool) {
	fs.BoolVar(download, "download", false, downloadUsage)
}

// checkDownload refuses --download for a dataset other than cifar10: MNIST and Adult are
// downloaded into the cache whenever --data-dir is not given, and the others have no files to
// fetch.
func checkDownload(given bool, dataset string) error {
	if given && dataset != "cifar10" {
		return usagef("--download: for --dataset cifar10 only; --dataset %s %s", quoteArg(dataset), map[bool]string{
			true:  "is downloaded into --cache-dir when --data-dir is not given",
			false: "has no files to download",
		}[dataset == "mnist" || dataset == "adult"])
	}
	return nil
}

// cifarDir is where CIFAR-10 is read: --data-dir, or the cache directory's dpsgd/cifar10.
func cifarDir(dir, cache string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return cacheDir("cifar10", cache)
}

// loadCIFAR10 loads CIFAR-10 from dir (--data-dir; empty: the cache). With download it first
// makes sure the batches are there (datasets.FetchCIFAR10: an archive already there is checked
// and extracted, a missing or wrong one downloaded); without, a directory without the batches
// is a usage error that says how to get them, and nothing touches the network.
func loadCIFAR10(ctx context.Context, dir, cache string, download bool) (train, test *datasets.Dataset, err error) {
	return loadCIFAR10From(ctx, datasets.CIFAR10Source(), &http.Client{Timeout: 30 * time.Minute}, dir, cache, download)
}

// loadCIFAR10From is loadCIFAR10 with the source and the HTTP client of --download.
func loadCIFAR10From(ctx context.Context, src datasets.Source, client *http.Client, dir, cache string, download bool) (train, test *datasets.Dataset, err error) {
	if dir, err = cifarDir(dir, cache); err != nil {
		return nil, nil, err
	}
	if download {
		if _, err := datasets.FetchCIFAR10(ctx, client, src, dir); err != nil {
			if errors.Is(err, datasets.ErrFormat) || errors.Is(err, context.Canceled) || len(src.Files) != 1 {
				return nil, nil, fmt.Errorf("dataset cifar10: --download: %w", err)
			}
			return nil, nil, fmt.Errorf("dataset cifar10: --download: %w. Offline? Fetch %s elsewhere from %s (MD5 %s), put it in %s "+
				"and run again with --download: an archive already there is checked and extracted without a download",
				err, src.Files[0].Name, cifarPage, src.Files[0].MD5, quoteArg(dir))
		}
	}
	train, test, err = datasets.LoadCIFAR10(dir)
	switch {
	case err == nil:
		return train, test, nil
	case errors.Is(err, fs.ErrNotExist) && !download:
		archive := filepath.Join(dir, datasets.CIFAR10Archive)
		if st, serr := os.Stat(archive); serr == nil && st.Mode().IsRegular() {
			return nil, nil, usagef("--dataset cifar10: %s holds %s but not its batches: add --download to check and extract it (nothing is downloaded)", quoteArg(dir), datasets.CIFAR10Archive)
		}
		return nil, nil, usagef("--dataset cifar10: no CIFAR-10 batches in %s (data_batch_1.bin … data_batch_5.bin and test_batch.bin, there or in %s/): "+
			"give --data-dir DIR holding them, or add --download to fetch %s (170 MB) from %s into it (never done without --download)",
			quoteArg(dir), datasets.CIFAR10Dir, datasets.CIFAR10Archive, cifarPage)
	}
	return nil, nil, usageError{fmt.Errorf("dataset cifar10: %w", err)}
}

// cifarPage is CIFAR-10's page, which publishes the archive and its MD5.
const cifarPage = "https://www.cs.toronto.edu/~kriz/cifar.html"
