// hami-wire-contract.md Appendix A: node gpu-1, 1x A100 40GB split 10, pod ml/train-0 (1 GPU, 3000 MiB).
export const UUID = 'GPU-aaaa1111-2222-3333-4444-555566667777';
export const REGISTER = `[{"id":"${UUID}","count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-PCIE-40GB","mode":"hami-core","health":true}]`;
export const LOCK = '2026-08-21T06:20:40Z,ml,train-0';
