package seal

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
)

// KeyFileName is the file under the data directory that holds a generated key when
// SWITCHYARD_SECRET_KEY is not set.
const KeyFileName = "secret.key"

// EnvVar is the environment variable that carries the production key.
const EnvVar = "SWITCHYARD_SECRET_KEY"

// GenerateKey returns a new random key of KeySize bytes.
func GenerateKey() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("seal: generate key: %w", err)
	}
	return key, nil
}

// EncodeKey is the text form of a key: standard base64 with padding (what `openssl rand -base64
// 32` prints).
func EncodeKey(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

// DecodeKey parses the text form of a key: base64 (standard or URL alphabet, padded or not) of
// exactly KeySize bytes; surrounding white space is ignored. Errors never repeat the input.
func DecodeKey(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, errors.New("key is empty")
	}
	var key []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err = enc.DecodeString(text); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("key is not valid base64 (generate one with: openssl rand -base64 32)")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("key decodes to %d bytes, want %d (generate one with: openssl rand -base64 32)", len(key), KeySize)
	}
	return key, nil
}

// LoadOrCreateKey returns the key-encryption key. fromEnv is the value of SWITCHYARD_SECRET_KEY:
// when set it is the key. Otherwise the key is read from <dataDir>/secret.key, which is created
// (mode 0600, in a directory created with mode 0700) with a new random key on first use. Using a
// file key logs a warning, since production must set SWITCHYARD_SECRET_KEY: losing the file makes
// every sealed secret unreadable. Key material is never logged. logger may be nil.
func LoadOrCreateKey(dataDir string, fromEnv string, logger logrus.FieldLogger) ([]byte, error) {
	if logger == nil {
		logger = logrus.StandardLogger()
	}
	if strings.TrimSpace(fromEnv) != "" {
		key, err := DecodeKey(fromEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVar, err)
		}
		return key, nil
	}
	if dataDir == "" {
		return nil, fmt.Errorf("seal: %s is not set and no data directory is configured to keep a generated key", EnvVar)
	}
	path := filepath.Join(dataDir, KeyFileName)
	fields := func(key []byte) logrus.Fields { return logrus.Fields{"path": path, "kid": KeyID(key)} }
	key, err := readKeyFile(path, logger)
	if errors.Is(err, fs.ErrNotExist) {
		var created bool
		if key, created, err = createKeyFile(dataDir, path); err == nil && created {
			logger.WithFields(fields(key)).Warn("generated a new secret key because " + EnvVar +
				" is not set; production must set " + EnvVar + " (losing this file makes every sealed secret unreadable)")
			return key, nil
		}
		if err == nil { // another process created the file first: use its key
			key, err = readKeyFile(path, logger)
		}
	}
	if err != nil {
		return nil, err
	}
	logger.WithFields(fields(key)).Warn("using the generated secret key in the data directory because " + EnvVar +
		" is not set; production must set " + EnvVar + " (losing this file makes every sealed secret unreadable)")
	return key, nil
}

func readKeyFile(path string, logger logrus.FieldLogger) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("seal: key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("seal: key file %s is not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		logger.WithFields(logrus.Fields{"path": path, "mode": fmt.Sprintf("%04o", info.Mode().Perm())}).
			Warn("secret key file is readable by other users; run chmod 600 on it")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: key file: %w", err)
	}
	key, err := DecodeKey(string(text))
	if err != nil {
		return nil, fmt.Errorf("seal: key file %s: %w", path, err)
	}
	return key, nil
}

// createKeyFile writes a new key to path unless the file already exists (created reports which).
// The key is written to a temporary file first and hard-linked into place, so no reader ever sees a
// partial file and two processes starting together agree on one key.
func createKeyFile(dataDir, path string) (key []byte, created bool, err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("seal: create data directory: %w", err)
	}
	key, err = GenerateKey()
	if err != nil {
		return nil, false, err
	}
	tmp, err := os.CreateTemp(dataDir, ".secret.key-*")
	if err != nil {
		return nil, false, fmt.Errorf("seal: create key file: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	// CreateTemp already uses 0600; say so explicitly, since the link keeps this file's mode.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("seal: create key file: %w", err)
	}
	if _, err := tmp.WriteString(EncodeKey(key) + "\n"); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("seal: write key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("seal: write key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("seal: write key file: %w", err)
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, false, nil
		}
		// No hard links on this file system: fall back to an exclusive create.
		return writeExclusive(path, key)
	}
	syncDir(dataDir)
	return key, true, nil
}

func writeExclusive(path string, key []byte) ([]byte, bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("seal: create key file: %w", err)
	}
	_, werr := f.WriteString(EncodeKey(key) + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("seal: write key file: %w", werr)
	}
	return key, true, nil
}

// syncDir makes the new directory entry durable; failure only weakens crash safety.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
