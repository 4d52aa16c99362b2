// The console is built to static files (dist/) that the gateway serves on its own origin: hashed
// assets under /assets/ (cached for good), index.html (never cached). Nothing is fetched from a CDN.
import tailwindcss from '@tailwindcss/vite';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [react(), tailwindcss()],
  // One build for both places (see libs/http console-files.ts): every reference is relative, the
  // servers turn index.html's ./assets/ into where they serve them.
  base: './',
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    // The gateway's CSP allows no inline script or style: every asset is a file of its own.
    assetsInlineLimit: 0,
    // A file per route is not worth it yet: one small entry keeps the first load to one round trip.
    sourcemap: false,
    emptyOutDir: true,
  },
});
