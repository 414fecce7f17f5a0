/** HAMi's NVIDIA device model as pure functions: inventory, requests, allocations, usage, fit, scores. */
export * from './allocation-codec.js';
export * from './card-checks.js';
export * from './fit.js';
export * from './gpu-order.js';
export * from './gpu-policy.js';
export * from './inventory.js';
export * from './numa.js';
export * from './quantity.js';
export * from './requests.js';
export * from './score.js';
export * from './scoring-weights.js';
export * from './topology.js';
export * from './usage.js';
