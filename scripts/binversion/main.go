// Command binversion prints the version stamped into Go binaries built by
// make release: the value of their main.version string variable (set with
// -ldflags "-X main.version=..."), read from the executable's symbol table
// and data, so that make release-check can check the binaries of platforms
// it cannot run. It reads 64-bit ELF and Mach-O executables that keep their
// symbols (built without -s).
//
// Usage: binversion FILE...  (one line per file: FILE VERSION)
package main

import (
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: binversion FILE...")
		os.Exit(2)
	}
	code := 0
	for _, path := range os.Args[1:] {
		v, err := version(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			continue
		}
		fmt.Println(path, v)
	}
	os.Exit(code)
}

// symbol is the name of the variable read.
const symbol = "main.version"

// section is a loaded piece of the image: its address range and contents.
type section struct {
	addr, size uint64
	r          io.ReaderAt
}

// image is what version needs of an executable.
type image struct {
	order    binary.ByteOrder
	sections []section
	symAddr  uint64
}

// version returns the string main.version holds in the binary at path.
func version(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("binversion: %w", err)
	}
	defer f.Close()
	im, err := open(f)
	if err != nil {
		return "", fmt.Errorf("binversion: %s: %w", path, err)
	}
	// A Go string is a pointer and a length, one 64-bit word each.
	hdr, err := im.read(im.symAddr, 16)
	if err != nil {
		return "", fmt.Errorf("binversion: %s: %s: %w", path, symbol, err)
	}
	ptr, n := im.order.Uint64(hdr[:8]), im.order.Uint64(hdr[8:])
	if n > 4096 {
		return "", fmt.Errorf("binversion: %s: %s is %d bytes long: not a version", path, symbol, n)
	}
	s, err := im.read(ptr, n)
	if err != nil {
		return "", fmt.Errorf("binversion: %s: %s's bytes: %w", path, symbol, err)
	}
	return string(s), nil
}

// errNoSymbol is returned for a binary without main.version in its
// symbol table (stripped, or not a Go command that has one).
var errNoSymbol = errors.New("no symbol " + symbol + " (a stripped binary?)")

// open reads the section table and main.version's address of an ELF or
// Mach-O file.
func open(f *os.File) (*image, error) {
	if ef, err := elf.NewFile(f); err == nil {
		if ef.Class != elf.ELFCLASS64 {
			return nil, errors.New("not a 64-bit ELF file")
		}
		im := &image{order: ef.ByteOrder}
		for _, s := range ef.Sections {
			if s.Type != elf.SHT_NOBITS && s.Addr != 0 {
				im.sections = append(im.sections, section{s.Addr, s.Size, s})
			}
		}
		syms, err := ef.Symbols()
		if errors.Is(err, elf.ErrNoSymbols) {
			return nil, errNoSymbol
		}
		if err != nil {
			return nil, err
		}
		for _, s := range syms {
			if s.Name == symbol {
				im.symAddr = s.Value
				return im, nil
			}
		}
		return nil, errNoSymbol
	}
	if mf, err := macho.NewFile(f); err == nil {
		if mf.Magic != macho.Magic64 {
			return nil, errors.New("not a 64-bit Mach-O file")
		}
		im := &image{order: mf.ByteOrder}
		for _, s := range mf.Sections {
			// Zero-fill sections (bss) have no bytes in the file.
			if t := s.Flags & 0xff; t != 0x1 && t != 0xc && t != 0x12 {
				im.sections = append(im.sections, section{s.Addr, s.Size, s})
			}
		}
		if mf.Symtab == nil {
			return nil, errNoSymbol
		}
		for _, s := range mf.Symtab.Syms {
			// Mach-O symbol names carry a leading underscore.
			if s.Name == symbol || s.Name == "_"+symbol {
				im.symAddr = s.Value
				return im, nil
			}
		}
		return nil, errNoSymbol
	}
	return nil, errors.New("neither an ELF nor a Mach-O file")
}

// read returns n bytes at virtual address addr.
func (im *image) read(addr, n uint64) ([]byte, error) {
	for _, s := range im.sections {
		if addr >= s.addr && addr-s.addr <= s.size && n <= s.size-(addr-s.addr) {
			b := make([]byte, n)
			if _, err := s.r.ReadAt(b, int64(addr-s.addr)); err != nil {
				return nil, err
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("address %#x (+%d) is in no section with contents", addr, n)
}
