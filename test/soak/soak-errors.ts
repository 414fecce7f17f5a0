/**
 * The soak's own errors. They are separate from src/'s WardenError on purpose: the soak measures
 * src/ and must keep working while src/ is being edited.
 */
export class SoakError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The soak was asked for something it cannot do (bad flags, a step it does not know): exit 2. */
export class SoakUsageError extends SoakError {}

/** package.json's "test" script is not a plain `npm run a && npm run b ...` chain: exit 2. */
export class SuiteShapeError extends SoakUsageError {}

/** `--steps` named a step that is not one of the "test" script's steps: exit 2. */
export class UnknownStepError extends SoakUsageError {
  constructor(
    readonly step: string,
    known: readonly string[],
  ) {
    super(`unknown step "${step}" in --steps; the "test" script's steps are: ${known.join(', ')}`);
  }
}
