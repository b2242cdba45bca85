//! PNG rendering of the SVG plots with resvg (pure Rust), drawing text with the system's
//! fonts (DejaVu Sans, from Debian's `fonts-dejavu-core`).

use resvg::{tiny_skia, usvg};
use std::sync::OnceLock;

/// Why a plot could not be rendered to PNG.
#[derive(Debug, thiserror::Error)]
pub enum PngError {
    /// usvg could not parse the SVG.
    #[error("the plot is not valid SVG: {0}")]
    Svg(String),
    /// The raster would be empty or over 20 000 px on a side (width, height in px).
    #[error("the plot is too large to rasterise ({0}×{1} px)")]
    Size(u32, u32),
    /// The PNG encoder failed.
    #[error("PNG encoding failed: {0}")]
    Encode(String),
    #[error(
        "no fonts found on this system, so plot labels cannot be drawn: install one (Debian: apt-get install fonts-dejavu-core)"
    )]
    /// No system font is installed.
    NoFonts,
}

/// The system font database, loaded once.
fn fonts() -> &'static std::sync::Arc<usvg::fontdb::Database> {
    static DB: OnceLock<std::sync::Arc<usvg::fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        db.set_sans_serif_family("DejaVu Sans");
        std::sync::Arc::new(db)
    })
}

/// Rasterises an SVG document at `scale` (1.0 = one pixel per SVG unit) into PNG bytes.
pub fn render(svg: &str, scale: f32) -> Result<Vec<u8>, PngError> {
    if fonts().is_empty() {
        return Err(PngError::NoFonts);
    }
    let opt = usvg::Options {
        font_family: "DejaVu Sans".into(),
        fontdb: fonts().clone(),
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| PngError::Svg(e.to_string()))?;
    let size = tree.size();
    let (w, h) = (
        (size.width() * scale).ceil() as u32,
        (size.height() * scale).ceil() as u32,
    );
    if w == 0 || h == 0 || w > 20_000 || h > 20_000 {
        return Err(PngError::Size(w, h));
    }
    let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or(PngError::Size(w, h))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    #[ignore = "needs system fonts (fonts-dejavu-core): ./run-tests installs them and runs it"]
    fn renders_text_and_shapes() {
        let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="50"><rect width="200" height="50" fill="#fff"/><text x="10" y="30" font-size="20" font-family="DejaVu Sans">1 KiB</text></svg>"##;
        match super::render(svg, 1.0) {
            Ok(png) => assert!(png.starts_with(b"\x89PNG")),
            Err(super::PngError::NoFonts) => {
                panic!("no system fonts: apt-get install fonts-dejavu-core")
            }
            Err(e) => panic!("{e}"),
        }
        assert!(super::render("not svg", 1.0).is_err());
    }
}
