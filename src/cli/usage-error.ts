/** A command line that cannot be run: its message goes to stderr, with exit status 2. In a module of its own, so that flag parsers options.ts imports can throw it without an import cycle. */
export class UsageError extends Error {}
