export interface KubeconfigSetting {
  /** Files in order; the first that sets a name (or current-context) wins, as kubectl merges. */
  paths: readonly string[];
  /** The setting and its source, for messages: `KUBECONFIG (env)`, `KUBECONFIG (flag --kubeconfig)`. */
  origin: string;
  /**
   * --kubeconfig: the one file must exist. KUBECONFIG: missing entries are skipped, as kubectl does, while one exists.
   */
  explicit: boolean;
}
