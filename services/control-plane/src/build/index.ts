/**
 * Building revisions from uploaded project tarballs: unpack, install, validate in a child process.
 */
export { BuildCancelledError, BuildFailedError, UnsafeTarballError } from './errors.js';
export { ProjectBuilder, type BuildArtifact, type BuildInput, type BuildLog, type BuildLogSink, type ProjectBuilderOptions } from './project-builder.js';
export { planInstall, type InstallPlan, type PackageManagerName } from './package-manager.js';
export { unpackTarball, type TarballSource, type UnpackLimits, type UnpackResult } from './unpack.js';
