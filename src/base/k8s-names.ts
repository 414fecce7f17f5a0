/**
 * Kubernetes object-name rules (k8s.io/apimachinery validation), for names that arrive in
 * requests vgpu-warden did not get from the apiserver (extender arguments). Pure.
 */
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A DNS-1123 label of at most 63 characters: a namespace. */
export function isDnsLabel(text: string): boolean {
  // The length first: the pattern then only ever runs on short strings.
  return text.length <= 63 && LABEL.test(text);
}

/** A DNS-1123 subdomain of at most 253 characters: a pod or node name. */
export function isDnsSubdomain(text: string): boolean {
  return text.length <= 253 && SUBDOMAIN.test(text);
}
