/**
 * How an agent pod's init container authenticates to the control plane's artifact endpoint when it
 * fetches its revision's build.
 */

/** The header the artifact credential travels in (`Authorization: Bearer <credential>`). */
export const ARTIFACT_AUTH_SCHEME = 'Bearer';
