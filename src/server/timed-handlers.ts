import type { ExtenderHandlers } from '../extender/protocol.js';
import type { AdmissionHandler } from '../admission/admission-types.js';
import type { WardenMetrics } from '../telemetry/metrics.js';

type Clock = () => number;

// The apiserver sends only these; anything else is bad input and must not create new series.
const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/**
 * The extender's handlers with filter and bind timed into the duration histograms. A bind counts
 * as an error when it throws or answers with an Error (kube-scheduler will retry the pod).
 */
export function timedExtenderHandlers(
  handlers: ExtenderHandlers,
  metrics: Pick<WardenMetrics, 'observeBind' | 'observeFilter'>,
  clock: Clock = () => performance.now(),
): ExtenderHandlers {
  return {
    filter: async (args, signal) => {
      const started = clock();
      try {
        return await handlers.filter(args, signal);
      } finally {
        metrics.observeFilter((clock() - started) / 1000);
      }
    },
    prioritize: (args, signal) => handlers.prioritize(args, signal),
    bind: async (args, signal) => {
      const started = clock();
      let failed = true;
      try {
        const result = await handlers.bind(args, signal);
        failed = result.Error !== '';
        return result;
      } finally {
        metrics.observeBind((clock() - started) / 1000, failed ? 'error' : 'success');
      }
    },
  };
}

/** The admission handler with every review timed into the histogram, by operation. */
export function timedAdmissionHandler(
  handler: AdmissionHandler,
  metrics: Pick<WardenMetrics, 'observeAdmission'>,
  clock: Clock = () => performance.now(),
): AdmissionHandler {
  return {
    handle: async (request, signal) => {
      const started = clock();
      try {
        return await handler.handle(request, signal);
      } finally {
        metrics.observeAdmission(
          OPERATIONS.has(request.operation) ? request.operation : 'other',
          (clock() - started) / 1000,
        );
      }
    },
  };
}
