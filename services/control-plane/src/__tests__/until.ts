export { until } from '@berth/testing';

/** Whether an agent server answers its liveness probe. */
export const answers = (url: string): Promise<boolean> =>
  fetch(`${url}/ok`).then(
    (r) => r.ok,
    () => false,
  );
