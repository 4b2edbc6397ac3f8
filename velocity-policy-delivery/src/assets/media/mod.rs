//! What a file is, from its bytes: the format (never the extension), whether it is whole, and an
//! image's dimensions.

pub mod jpeg;

use std::fmt;

/// A file format, recognised by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// GIF.
    Gif,
    /// WebP.
    Webp,
    /// AVIF.
    Avif,
    /// SVG (text; vector, so exempt from the raster rules).
    Svg,
    /// WOFF2.
    Woff2,
    /// WOFF (version 1).
    Woff,
    /// TrueType.
    TrueType,
    /// OpenType with CFF outlines.
    OpenType,
    /// Embedded OpenType (Internet Explorer's format).
    Eot,
    /// Anything else.
    Unknown,
}

impl MediaType {
    /// The format of `bytes`, from their first bytes.
    #[must_use]
    pub fn sniff(bytes: &[u8]) -> MediaType {
        match bytes {
            [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => MediaType::Png,
            [0xff, 0xd8, 0xff, ..] => MediaType::Jpeg,
            [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => MediaType::Gif,
            [
                b'R',
                b'I',
                b'F',
                b'F',
                _,
                _,
                _,
                _,
                b'W',
                b'E',
                b'B',
                b'P',
                ..,
            ] => MediaType::Webp,
            [_, _, _, _, b'f', b't', b'y', b'p', ..] if is_avif(bytes) => MediaType::Avif,
            [b'w', b'O', b'F', b'2', ..] => MediaType::Woff2,
            [b'w', b'O', b'F', b'F', ..] => MediaType::Woff,
            [0x00, 0x01, 0x00, 0x00, ..] | [b't', b'r', b'u', b'e', ..] => MediaType::TrueType,
            [b'O', b'T', b'T', b'O', ..] => MediaType::OpenType,
            _ if bytes.get(34..36) == Some(b"LP") && bytes.len() > 36 => MediaType::Eot,
            _ if is_svg(bytes) => MediaType::Svg,
            _ => MediaType::Unknown,
        }
    }

    /// Its usual name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            MediaType::Png => "PNG",
            MediaType::Jpeg => "JPEG",
            MediaType::Gif => "GIF",
            MediaType::Webp => "WebP",
            MediaType::Avif => "AVIF",
            MediaType::Svg => "SVG",
            MediaType::Woff2 => "WOFF2",
            MediaType::Woff => "WOFF",
            MediaType::TrueType => "TrueType",
            MediaType::OpenType => "OpenType",
            MediaType::Eot => "EOT",
            MediaType::Unknown => "an unknown format",
        }
    }

    /// An image format a browser decodes.
    #[must_use]
    pub fn is_image(self) -> bool {
        self.is_raster() || self == MediaType::Svg
    }

    /// A raster image format.
    #[must_use]
    pub fn is_raster(self) -> bool {
        matches!(
            self,
            MediaType::Png | MediaType::Jpeg | MediaType::Gif | MediaType::Webp | MediaType::Avif
        )
    }

    /// AVIF or WebP: the formats `modern-image-formats` asks for.
    #[must_use]
    pub fn is_modern_image(self) -> bool {
        matches!(self, MediaType::Webp | MediaType::Avif)
    }

    /// A font format.
    #[must_use]
    pub fn is_font(self) -> bool {
        matches!(
            self,
            MediaType::Woff2
                | MediaType::Woff
                | MediaType::TrueType
                | MediaType::OpenType
                | MediaType::Eot
        )
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An ISO base media file whose major or compatible brands include AVIF (`avif`, `avis`).
fn is_avif(bytes: &[u8]) -> bool {
    let Some(size) = be32(bytes, 0) else {
        return false;
    };
    let end = usize::try_from(size).unwrap_or(usize::MAX).min(bytes.len());
    // Major brand at 8..12, minor version at 12..16, compatible brands from 16.
    let brands = bytes.get(8..12).into_iter().chain(
        bytes
            .get(16..end.max(16))
            .unwrap_or_default()
            .chunks_exact(4),
    );
    brands
        .into_iter()
        .any(|brand| brand == b"avif" || brand == b"avis")
}

fn is_svg(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    (text.starts_with('<')) && text.contains("<svg")
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let quad: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(quad))
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    let quad: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(quad))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let pair: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(pair))
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Whether a file of format `kind` is whole: its structure ends where the file does. The error
/// says what is missing, for a person (`its data ends inside the IDAT chunk`).
///
/// These are structural checks, not decoding: a file that passes may still hold bad pixels, but a
/// truncated upload or a half-written build output does not pass.
pub fn check_integrity(kind: MediaType, bytes: &[u8]) -> Result<(), String> {
    match kind {
        MediaType::Png => png_chunks(bytes),
        MediaType::Jpeg => {
            let trimmed = trim_trailing_padding(bytes);
            if trimmed.ends_with(&[0xff, 0xd9]) {
                Ok(())
            } else {
                Err("it does not end with the JPEG end-of-image marker (truncated?)".to_owned())
            }
        }
        MediaType::Gif => {
            if trim_trailing_padding(bytes).last() == Some(&0x3b) {
                Ok(())
            } else {
                Err("it does not end with the GIF trailer (truncated?)".to_owned())
            }
        }
        MediaType::Webp => {
            let declared = le32(bytes, 4)
                .map(|size| to_usize(u64::from(size) + 8))
                .ok_or("its RIFF header is cut short")?;
            if declared <= bytes.len() {
                Ok(())
            } else {
                Err(format!(
                    "its RIFF header declares {declared} bytes but the file has {}",
                    bytes.len()
                ))
            }
        }
        MediaType::Avif => iso_boxes(bytes),
        MediaType::Woff2 | MediaType::Woff => {
            let declared = be32(bytes, 8)
                .map(|length| to_usize(u64::from(length)))
                .ok_or("its header is cut short")?;
            if declared == bytes.len() {
                Ok(())
            } else {
                Err(format!(
                    "its header declares {declared} bytes but the file has {}",
                    bytes.len()
                ))
            }
        }
        MediaType::TrueType | MediaType::OpenType => sfnt_tables(bytes),
        MediaType::Svg | MediaType::Eot | MediaType::Unknown => Ok(()),
    }
}

/// Tools pad some files with zeros or a newline after their end marker; that is not damage.
fn trim_trailing_padding(bytes: &[u8]) -> &[u8] {
    let end = bytes
        .iter()
        .rposition(|b| !matches!(b, 0x00 | b'\n' | b'\r' | b' '))
        .map_or(0, |last| last + 1);
    bytes.get(..end).unwrap_or_default()
}

/// Walks PNG chunks from the signature to `IEND`.
fn png_chunks(bytes: &[u8]) -> Result<(), String> {
    let mut at = 8usize;
    loop {
        let (Some(length), Some(kind)) = (be32(bytes, at), bytes.get(at + 4..at + 8)) else {
            return Err("its data ends before the IEND chunk (truncated)".to_owned());
        };
        let end = at
            .checked_add(12)
            .and_then(|n| n.checked_add(to_usize(u64::from(length))));
        let name = String::from_utf8_lossy(kind).into_owned();
        match end {
            Some(end) if end <= bytes.len() => {
                if kind == b"IEND" {
                    return Ok(());
                }
                at = end;
            }
            _ => return Err(format!("its data ends inside the {name} chunk (truncated)")),
        }
    }
}

/// Walks the top-level boxes of an ISO base media file (AVIF).
fn iso_boxes(bytes: &[u8]) -> Result<(), String> {
    let mut at = 0usize;
    let mut seen_media = false;
    while at < bytes.len() {
        let size = be32(bytes, at).ok_or("a box header is cut short (truncated)")?;
        let kind = bytes
            .get(at + 4..at + 8)
            .ok_or("a box header is cut short (truncated)")?;
        let name = String::from_utf8_lossy(kind).into_owned();
        let length = match size {
            0 => bytes.len() - at,
            1 => to_usize(be64(bytes, at + 8).ok_or("a box header is cut short (truncated)")?),
            n => to_usize(u64::from(n)),
        };
        if length < 8 {
            return Err(format!("its `{name}` box has an impossible size"));
        }
        let end = at.saturating_add(length);
        if end > bytes.len() {
            return Err(format!("its data ends inside the `{name}` box (truncated)"));
        }
        seen_media |= kind == b"mdat";
        at = end;
    }
    if seen_media {
        Ok(())
    } else {
        Err("it has no `mdat` box: the image data is missing".to_owned())
    }
}

fn be64(bytes: &[u8], at: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_be_bytes(eight))
}

/// Every table of a TrueType or OpenType file lies inside the file.
fn sfnt_tables(bytes: &[u8]) -> Result<(), String> {
    let tables = be16(bytes, 4).ok_or("its header is cut short")?;
    for i in 0..usize::from(tables) {
        let record = 12 + 16 * i;
        let (Some(offset), Some(length)) = (be32(bytes, record + 8), be32(bytes, record + 12))
        else {
            return Err("its table directory is cut short (truncated)".to_owned());
        };
        if u64::from(offset) + u64::from(length) > bytes.len() as u64 {
            let tag = bytes
                .get(record..record + 4)
                .map(|tag| String::from_utf8_lossy(tag).into_owned())
                .unwrap_or_default();
            return Err(format!(
                "its `{tag}` table ends past the end of the file (truncated)"
            ));
        }
    }
    Ok(())
}

/// The width and height a raster image declares in its header.
pub fn dimensions(bytes: &[u8]) -> Result<(u32, u32), String> {
    // Header parsers read untrusted offsets; should one ever panic on a hostile file, that is
    // one unreadable image, not an aborted audit.
    let read = std::panic::catch_unwind(|| imagesize::blob_size(bytes))
        .map_err(|_| "its header could not be read".to_owned())?;
    let size = read.map_err(|error| match error {
        imagesize::ImageError::NotSupported => "its header could not be read".to_owned(),
        imagesize::ImageError::CorruptedImage => "its header is corrupt".to_owned(),
        imagesize::ImageError::IoError(error) => format!("its header could not be read: {error}"),
    })?;
    match (u32::try_from(size.width), u32::try_from(size.height)) {
        (Ok(width), Ok(height)) if width > 0 && height > 0 => Ok((width, height)),
        _ => Err(format!(
            "its header declares an impossible size of {}×{}",
            size.width, size.height
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(chunks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
        let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
        for (kind, data) in chunks {
            out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
            out.extend_from_slice(*kind);
            out.extend_from_slice(data);
            out.extend_from_slice(&[0, 0, 0, 0]); // CRC: not checked
        }
        out
    }

    #[test]
    fn formats_come_from_bytes() {
        assert_eq!(MediaType::sniff(&png(&[])), MediaType::Png);
        assert_eq!(MediaType::sniff(&[0xff, 0xd8, 0xff, 0xe0]), MediaType::Jpeg);
        assert_eq!(MediaType::sniff(b"GIF89a...."), MediaType::Gif);
        assert_eq!(MediaType::sniff(b"RIFF\x10\0\0\0WEBPVP8 "), MediaType::Webp);
        assert_eq!(
            MediaType::sniff(b"\0\0\0\x1cftypmif1\0\0\0\0mif1avifmiaf"),
            MediaType::Avif
        );
        assert_eq!(
            MediaType::sniff(b"\0\0\0\x18ftypheic\0\0\0\0mif1heic"),
            MediaType::Unknown
        );
        assert_eq!(MediaType::sniff(b"wOF2\0\x01\0\0"), MediaType::Woff2);
        assert_eq!(MediaType::sniff(b"wOFF\0\x01\0\0"), MediaType::Woff);
        assert_eq!(MediaType::sniff(&[0, 1, 0, 0, 0, 4]), MediaType::TrueType);
        assert_eq!(MediaType::sniff(b"OTTO\0\x04"), MediaType::OpenType);
        assert_eq!(
            MediaType::sniff(b"\xef\xbb\xbf<?xml version=\"1.0\"?>\n<svg xmlns=\"\"/>"),
            MediaType::Svg
        );
        assert_eq!(MediaType::sniff(b"hello"), MediaType::Unknown);
        assert_eq!(MediaType::sniff(b""), MediaType::Unknown);
    }

    #[test]
    fn png_chunks_must_reach_iend() {
        let whole = png(&[(b"IHDR", &[0; 13]), (b"IDAT", &[1; 20]), (b"IEND", &[])]);
        assert_eq!(check_integrity(MediaType::Png, &whole), Ok(()));
        let cut = &whole[..whole.len() - 20];
        assert_eq!(
            check_integrity(MediaType::Png, cut),
            Err("its data ends inside the IDAT chunk (truncated)".to_owned())
        );
        let no_end = png(&[(b"IHDR", &[0; 13])]);
        assert!(check_integrity(MediaType::Png, &no_end).is_err());
        // A huge declared length does not overflow.
        let mut huge = png(&[(b"IHDR", &[0; 13])]);
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, b'I', b'D', b'A', b'T']);
        assert!(check_integrity(MediaType::Png, &huge).is_err());
    }

    #[test]
    fn end_markers_and_declared_lengths() {
        assert!(check_integrity(MediaType::Jpeg, &[0xff, 0xd8, 0xff, 0xd9, 0, 0]).is_ok());
        assert!(check_integrity(MediaType::Jpeg, &[0xff, 0xd8, 0xff, 0xe0, 1, 2]).is_err());
        assert!(check_integrity(MediaType::Gif, b"GIF89a;").is_ok());
        assert!(check_integrity(MediaType::Gif, b"GIF89a").is_err());
        let webp = b"RIFF\x04\0\0\0WEBP";
        assert!(check_integrity(MediaType::Webp, webp).is_ok());
        assert!(check_integrity(MediaType::Webp, b"RIFF\x40\0\0\0WEBP").is_err());
        assert!(check_integrity(MediaType::Woff2, b"wOF2\0\x01\0\0\0\0\0\x0c").is_ok());
        assert!(check_integrity(MediaType::Woff2, b"wOF2\0\x01\0\0\0\0\0\x40").is_err());
        let avif = b"\0\0\0\x10ftypavif\0\0\0\0\0\0\0\x09mdat\x01";
        assert!(check_integrity(MediaType::Avif, avif).is_ok());
        assert!(check_integrity(MediaType::Avif, &avif[..avif.len() - 1]).is_err());
        let ttf = [
            0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, // header: one table
            b'g', b'l', b'y', b'f', 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 4, // record
            1, 2, 3, 4,
        ];
        assert!(check_integrity(MediaType::TrueType, &ttf).is_ok());
        assert_eq!(
            check_integrity(MediaType::TrueType, &ttf[..30]),
            Err("its `glyf` table ends past the end of the file (truncated)".to_owned())
        );
    }

    #[test]
    fn dimensions_of_a_png_header() {
        let mut ihdr = [0u8; 13];
        ihdr[..4].copy_from_slice(&640u32.to_be_bytes());
        ihdr[4..8].copy_from_slice(&480u32.to_be_bytes());
        let file = png(&[(b"IHDR", &ihdr), (b"IEND", &[])]);
        assert_eq!(dimensions(&file), Ok((640, 480)));
        assert!(dimensions(&file[..12]).is_err());
        assert!(dimensions(b"not an image at all").is_err());
    }
}
