/** Payloads of the export and ingest benchmarks. */

/** A pool of `count` texts of ~1.5 KB made of pseudo-words (seeded): payloads zstd compresses about as well as prose. */
export function texts(count) {
  let seed = 42;
  const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const letters = 'etaoinshrdlcumwfgypbvkjxqz';
  const words = Array.from({ length: 5000 }, () => Array.from({ length: 2 + Math.floor(random() * 9) }, () => letters[Math.floor(random() * random() * 26)]).join(''));
  return Array.from({ length: count }, () => {
    let text = '';
    while (text.length < 1500) text += `${words[Math.floor(random() * words.length)]}${random() < 0.1 ? '. ' : ' '}`;
    return text;
  });
}
