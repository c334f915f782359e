package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifests are the decoded objects of one kustomization directory.
type manifests struct {
	images       []kustomizeImage
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
}

func (m *manifests) count() int {
	return len(m.statefulSets) + len(m.services) + len(m.pdbs)
}

// kustomization is the part of kustomize's Kustomization that the
// directory uses; decoding it strictly rejects any other field.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
}

// decoder decodes the kinds the manifests may hold, strictly.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the scheme is static: this fails on every run or never
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// load reads dir/kustomization.yaml and decodes every resource it lists.
// Every YAML file in dir must be listed, so none is left unchecked.
func load(dir string) (*manifests, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("kubecheck: %w", err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return nil, fmt.Errorf("kubecheck: kustomization.yaml: %w", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("kubecheck: kustomization.yaml: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		got, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, fmt.Errorf("kubecheck: %w", err)
		}
		files = append(files, got...)
	}
	sort.Strings(files)
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			return nil, fmt.Errorf("kubecheck: %s is not among kustomization.yaml's resources", base)
		}
	}
	m := &manifests{images: k.Images}
	for _, r := range k.Resources {
		if err := m.loadFile(filepath.Join(dir, r)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// loadFile decodes every YAML document in path.
func (m *manifests) loadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kubecheck: %w", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubecheck: %s: %w", path, err)
		}
		if err := m.add(doc); err != nil {
			return fmt.Errorf("kubecheck: %s, document %d: %w", path, i, err)
		}
	}
}

// add decodes one document strictly and files the object by kind; a
// document of comments only is skipped.
func (m *manifests) add(doc []byte) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return nil
	}
	obj, _, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		return err
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		m.statefulSets = append(m.statefulSets, o)
	case *corev1.Service:
		m.services = append(m.services, o)
	case *policyv1.PodDisruptionBudget:
		m.pdbs = append(m.pdbs, o)
	default:
		return fmt.Errorf("kind %s is not one coordd's manifests use", obj.GetObjectKind().GroupVersionKind().Kind)
	}
	return nil
}
