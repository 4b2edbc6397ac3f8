//! What a JPEG's headers say about how it was encoded, and what re-encoding it would give.
//!
//! The quality is read from the quantisation tables (`DQT`): encoders built on libjpeg (and
//! Chrome's, and most others) scale the standard tables of the JPEG specification's Annex K by
//! the quality, so the ratio of the file's luminance table to the standard one gives the quality
//! back (exactly for libjpeg's tables; to within a few points for others).
//!
//! The sizes of a re-encode are estimated from the size of the entropy-coded data and a table of
//! ratios measured on images decoded and re-encoded with libjpeg-turbo (`cjpeg -optimize`,
//! which gives what Chrome's encoder gives to the byte on the fixture's photos) and libwebp
//! (`cwebp -q 85`), at every source quality from 30 to 100, in 4:2:0 and 4:4:4: 54 seeded
//! plasma fractals (the fixtures' photographs) and 19 photographs of two published site themes
//! (only the ratios are kept). The ratio taken is the largest seen for the sizes Lighthouse
//! compares with (JPEG at quality 92, WebP at 85), so a saving is never overstated, and the
//! median for the size at quality 85 that the message gives. Metadata (`APPn`, `COM`) is dropped
//! by a re-encode and counts as saved.
//!
//! Only files whose luminance table is libjpeg's standard one scaled (every entry within 10% on
//! average) are estimated: other encoders tune their tables (coarser low frequencies, flatter
//! high ones), a quality read from such a table says little about its re-encode, and no finding
//! is better than a wrong one.

/// The standard luminance quantisation table (JPEG Annex K.1), in zigzag order.
const STANDARD_LUMINANCE: [u32; 64] = [
    16, 11, 12, 14, 12, 10, 16, 14, 13, 14, 18, 17, 16, 19, 24, 40, 26, 24, 22, 22, 24, 49, 35, 37,
    29, 40, 58, 51, 61, 60, 57, 51, 56, 55, 64, 72, 92, 78, 64, 68, 87, 69, 55, 56, 80, 109, 81,
    87, 95, 98, 103, 104, 103, 62, 77, 113, 121, 112, 100, 120, 92, 101, 103, 99,
];

/// Its sum: libjpeg scales every entry alike, so the sums' ratio is the scale.
const STANDARD_LUMINANCE_SUM: u32 = 3688;

/// Chroma subsampling, from the frame header's sampling factors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subsampling {
    /// 4:4:4: full-resolution colour.
    Full,
    /// 4:2:0, 4:2:2 and other reduced chroma.
    Reduced,
    /// One component (greyscale).
    Grey,
}

/// What a JPEG's headers tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JpegInfo {
    /// The quality its luminance table corresponds to, 1 to 100.
    pub quality: f64,
    /// Its chroma subsampling.
    pub subsampling: Subsampling,
    /// Bytes of entropy-coded data (the scans) and the headers a re-encode keeps.
    pub scan_bytes: u64,
    /// Bytes of metadata a re-encode drops (`APPn` and `COM` segments).
    pub metadata_bytes: u64,
    /// Progressive (`SOF2`).
    pub progressive: bool,
    /// Its luminance table is libjpeg's standard one, scaled.
    pub standard_tables: bool,
}

/// Reads the segments of a JPEG up to its first scan. `None` when they cannot be read (the
/// integrity check reports that) or the file has no luminance table.
#[must_use]
pub fn read(bytes: &[u8]) -> Option<JpegInfo> {
    let mut at = 2usize;
    let mut luminance: Option<[u32; 64]> = None;
    let mut subsampling = None;
    let mut metadata = 0u64;
    let mut progressive = false;
    loop {
        let marker = *bytes.get(at + 1)?;
        if *bytes.get(at)? != 0xff {
            return None;
        }
        if marker == 0xff {
            at += 1;
            continue;
        }
        if marker == 0xd8 || (0xd0..=0xd7).contains(&marker) || marker == 0x01 {
            at += 2;
            continue;
        }
        let length = usize::from(u16::from_be_bytes([
            *bytes.get(at + 2)?,
            *bytes.get(at + 3)?,
        ]));
        let body = bytes.get(at + 4..at + 2 + length)?;
        match marker {
            0xdb => {
                // One or more tables: precision and id, then 64 values of 8 or 16 bits.
                let mut t = 0;
                while t < body.len() {
                    let (precision, id) = (body[t] >> 4, body[t] & 0x0f);
                    let size = if precision == 0 { 64 } else { 128 };
                    let values = body.get(t + 1..t + 1 + size)?;
                    if id == 0 {
                        let mut table = [0u32; 64];
                        for (k, entry) in table.iter_mut().enumerate() {
                            *entry = if precision == 0 {
                                u32::from(values[k])
                            } else {
                                u32::from(u16::from_be_bytes([values[2 * k], values[2 * k + 1]]))
                            };
                        }
                        luminance = Some(table);
                    }
                    t += 1 + size;
                }
            }
            0xc0..=0xcf if marker != 0xc4 && marker != 0xc8 && marker != 0xcc => {
                progressive = marker == 0xc2 || marker == 0xc6 || marker == 0xca || marker == 0xce;
                let components = *body.get(5)?;
                subsampling = Some(if components == 1 {
                    Subsampling::Grey
                } else {
                    let first = *body.get(7)?;
                    let rest_same =
                        (1..usize::from(components)).all(|i| body.get(7 + 3 * i) == Some(&first));
                    if rest_same {
                        Subsampling::Full
                    } else {
                        Subsampling::Reduced
                    }
                });
            }
            0xe0..=0xef | 0xfe => metadata += length as u64 + 2,
            0xda => {
                let table = luminance?;
                let sum: u32 = table.iter().sum();
                let scale = f64::from(sum) * 100.0 / f64::from(STANDARD_LUMINANCE_SUM);
                // libjpeg: scale = 5000 / q below 50, 200 - 2q from 50.
                let quality = if scale <= 100.0 {
                    (200.0 - scale) / 2.0
                } else {
                    5000.0 / scale
                };
                // libjpeg's table at that scale, entry by entry (zigzag order both).
                let deviation = STANDARD_LUMINANCE
                    .iter()
                    .zip(table)
                    .map(|(&standard, found)| {
                        let expected = ((f64::from(standard) * scale + 50.0) / 100.0)
                            .floor()
                            .clamp(1.0, 255.0);
                        (f64::from(found) - expected).abs() / expected
                    })
                    .sum::<f64>()
                    / 64.0;
                return Some(JpegInfo {
                    standard_tables: deviation <= 0.1,
                    quality: quality.clamp(1.0, 100.0),
                    subsampling: subsampling?,
                    scan_bytes: (bytes.len() - at) as u64,
                    metadata_bytes: metadata,
                    progressive,
                });
            }
            _ => {}
        }
        at += 2 + length;
    }
}

/// Measured ratios, by source quality: the size of a quality-92 re-encode to the source's
/// entropy-coded data (largest seen), the same for quality 85 (median), and the size of a
/// quality-85 WebP to the quality-92 JPEG (largest seen).
const REDUCED: &[(f64, f64, f64, f64)] = &[
    (30.0, 2.397, 1.564, 1.177),
    (40.0, 2.057, 1.481, 1.083),
    (50.0, 1.748, 1.385, 1.078),
    (60.0, 1.654, 1.275, 1.012),
    (70.0, 1.499, 1.211, 0.928),
    (75.0, 1.393, 1.185, 0.920),
    (80.0, 1.291, 1.086, 0.877),
    (85.0, 1.217, 1.008, 0.817),
    (88.0, 1.154, 0.949, 0.773),
    (90.0, 1.080, 0.874, 0.765),
    (92.0, 1.036, 0.806, 0.757),
    (94.0, 0.948, 0.626, 0.772),
    (95.0, 0.892, 0.562, 0.767),
    (97.0, 0.776, 0.441, 0.768),
    (100.0, 0.569, 0.239, 0.770),
];

const FULL: &[(f64, f64, f64, f64)] = &[
    (30.0, 2.086, 1.414, 1.089),
    (40.0, 1.751, 1.244, 1.027),
    (50.0, 1.507, 1.115, 1.029),
    (60.0, 1.428, 0.999, 0.988),
    (70.0, 1.395, 0.900, 0.903),
    (75.0, 1.268, 0.855, 0.899),
    (80.0, 1.160, 0.764, 0.863),
    (85.0, 1.121, 0.719, 0.815),
    (88.0, 1.042, 0.687, 0.778),
    (90.0, 1.001, 0.659, 0.774),
    (92.0, 0.963, 0.627, 0.773),
    (94.0, 0.885, 0.423, 0.778),
    (95.0, 0.850, 0.377, 0.767),
    (97.0, 0.760, 0.290, 0.771),
    (100.0, 0.544, 0.137, 0.770),
];

/// What a fresh encode of the decoded pixels would weigh, in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reencoded {
    /// As a baseline JPEG at quality 92, 4:2:0, no metadata (what Lighthouse's
    /// `uses-optimized-images` compares with), estimated on the high side.
    pub jpeg_92: u64,
    /// As a JPEG at quality 85 (what we advise), a typical estimate.
    pub jpeg_85: u64,
    /// As a WebP at quality 85, estimated on the high side.
    pub webp_85: u64,
}

/// The headers a re-encode writes: quantisation and Huffman tables, frame and scan headers.
const HEADERS: u64 = 620;

/// The estimate for a JPEG with `info`; `None` for greyscale (measured too little) and for
/// tables that are not libjpeg's.
#[must_use]
pub fn reencoded(info: &JpegInfo) -> Option<Reencoded> {
    if !info.standard_tables {
        return None;
    }
    let table = match info.subsampling {
        Subsampling::Reduced => REDUCED,
        Subsampling::Full => FULL,
        Subsampling::Grey => return None,
    };
    let q = info.quality.clamp(30.0, 100.0);
    let upper = table
        .iter()
        .position(|row| row.0 >= q)
        .unwrap_or(table.len() - 1);
    let (hi, lo) = (table[upper], table[upper.saturating_sub(1)]);
    let t = if hi.0 > lo.0 {
        (q - lo.0) / (hi.0 - lo.0)
    } else {
        0.0
    };
    let mix = |a: f64, b: f64| a + (b - a) * t;
    let data = info.scan_bytes.saturating_sub(HEADERS) as f64;
    // Progressive scans are some 5% smaller than the baseline a re-encode writes.
    let data = if info.progressive { data * 1.06 } else { data };
    let jpeg_92 = data * mix(lo.1, hi.1) + HEADERS as f64;
    let jpeg_85 = data * mix(lo.2, hi.2) + HEADERS as f64;
    let webp_85 = jpeg_92 * mix(lo.3, hi.3);
    Some(Reencoded {
        jpeg_92: jpeg_92.round() as u64,
        jpeg_85: jpeg_85.round() as u64,
        webp_85: webp_85.round() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal JPEG header: SOI, one DQT (luminance scaled to `scale`%), SOF0 with the given
    /// luma sampling factor, an APP1 of `exif` bytes, SOS, `data` bytes, EOI.
    fn jpeg(scale: u32, luma_sampling: u8, exif: usize, data: usize) -> Vec<u8> {
        let mut out = vec![0xff, 0xd8];
        out.extend([0xff, 0xe1]);
        out.extend(u16::try_from(exif + 2).unwrap().to_be_bytes());
        out.extend(vec![0; exif]);
        out.extend([0xff, 0xdb, 0, 67, 0]);
        for entry in STANDARD_LUMINANCE {
            let v = (entry * scale + 50) / 100;
            out.push(u8::try_from(v.clamp(1, 255)).unwrap());
        }
        out.extend([0xff, 0xc0, 0, 17, 8, 0, 16, 0, 16, 3]);
        out.extend([1, luma_sampling, 0, 2, 0x11, 1, 3, 0x11, 1]);
        out.extend([0xff, 0xda, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0]);
        out.extend(vec![0x55; data]);
        out.extend([0xff, 0xd9]);
        out
    }

    #[test]
    fn quality_subsampling_and_metadata_from_the_headers() {
        // Scale 10% is quality 95; 100% is 50; 200% is 25.
        let info = read(&jpeg(10, 0x22, 1000, 5000)).unwrap();
        assert_eq!(info.subsampling, Subsampling::Reduced);
        assert_eq!(info.metadata_bytes, 1004);
        assert!((info.quality - 95.0).abs() < 2.0, "{info:?}");
        let info = read(&jpeg(100, 0x11, 10, 5000)).unwrap();
        assert!(info.standard_tables);
        assert_eq!(info.subsampling, Subsampling::Full);
        assert!((info.quality - 50.0).abs() < 2.0, "{info:?}");
        assert!((read(&jpeg(200, 0x11, 10, 10)).unwrap().quality - 25.0).abs() < 2.0);
        // A tuned table (flat, as some encoders write) is read but not estimated.
        let mut tuned = jpeg(10, 0x11, 10, 5000);
        let at = tuned.windows(2).position(|w| w == [0xff, 0xdb]).unwrap() + 5;
        tuned[at..at + 64].fill(3);
        let info = read(&tuned).unwrap();
        assert!(!info.standard_tables);
        assert_eq!(reencoded(&info), None);
        assert_eq!(read(&[0xff, 0xd8, 0xff]), None);
        assert_eq!(read(b"not a jpeg"), None);
    }

    #[test]
    fn a_high_quality_file_shrinks_and_a_low_quality_one_grows() {
        let high = read(&jpeg(10, 0x11, 10, 100_000)).unwrap();
        let estimate = reencoded(&high).unwrap();
        assert!(estimate.jpeg_92 < 90_000, "{estimate:?}");
        assert!(estimate.jpeg_85 < estimate.jpeg_92);
        let low = read(&jpeg(100, 0x22, 10, 100_000)).unwrap();
        assert!(reencoded(&low).unwrap().jpeg_92 > 100_000);
    }
}
