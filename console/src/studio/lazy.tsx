/** Studio, loaded when first shown: its chunk (the SDK, dagre) is not part of the console's first load. */
import { lazy, Suspense } from 'react';
import type { StudioTarget } from './studio';

const Studio = lazy(() => import('./studio'));

export function LazyStudio({ target }: { target: StudioTarget }) {
  return (
    <Suspense fallback={<p>Loading Studio…</p>}>
      <Studio target={target} />
    </Suspense>
  );
}
